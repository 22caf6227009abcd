"""What keeps a turn whole across retries and crashes: idempotency keys, turn leases, orphaned
turns, replays of a stored answer, and the guards that hold them together."""
