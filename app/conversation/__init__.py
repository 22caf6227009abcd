"""The conversation: chat sessions, their turns, the pipeline that answers a turn, streaming,
durability (idempotency, leases, orphans, replay), history and checkpoints.

Its sub-packages are layered (`pyproject.toml`, contract "The conversation's layers"), top to
bottom: `endpoints` → `service` → `durability` → `streaming` → `pipeline` → `repository`,
`history`, `checkpoints` → `turn`. See docs/adr/0052-one-conversation-package.md.
"""
