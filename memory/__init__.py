"""What outlives the window: durable facts now; recall over past chats with the memory issue.

The tables (memories, message_embeddings) are created by migrations/versions/0001_initial.py.
"""
