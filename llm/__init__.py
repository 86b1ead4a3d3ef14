"""Talking to models: ports, the OpenAI-compatible adapter, SSE parsing, tokens, embedded models."""
