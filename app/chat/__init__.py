"""The chat turn's HTTP face: /chat and /chat/stream."""
