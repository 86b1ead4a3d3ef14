"""What outlives the window: recall over past chats and durable facts.

The tables (message_embeddings, memories) are created by migrations/versions/0001_initial.py;
recall and the memory tools come with the long-term memory issue.
"""
