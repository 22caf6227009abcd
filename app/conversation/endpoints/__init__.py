"""The conversation's HTTP face: /chat, /chat/stream and /sessions, with their dependencies."""
