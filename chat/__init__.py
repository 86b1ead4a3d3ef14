"""The conversation as the source of truth: chats, their messages and steps, in Postgres."""
