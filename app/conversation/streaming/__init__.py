"""Live runs of a turn over SSE: the hub, the Redis buffer, resume, encoding."""
