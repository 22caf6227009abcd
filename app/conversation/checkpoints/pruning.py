"""Bounded checkpoint storage: a thread keeps its newest checkpoints only.

Every turn stores one checkpoint (the graph runs with `durability="exit"`) plus a blob for each
channel whose version changed. Nothing in LangGraph ever deletes them, so a session's storage
grows with every turn although only the newest checkpoint is ever read (each turn starts from a
complete initial state). Each write of a checkpoint carries `PRUNE_THREAD` in its own
pipeline (see app/conversation/checkpoints/checkpointer.py): checkpoints beyond the newest `keep`
go, with their
pending writes and every blob no kept checkpoint refers to.

A blob is removed only if its version is older than the newest version of its channel among
the kept checkpoints: a concurrent turn of the same thread may have stored the blobs of a
checkpoint whose row is not written yet, and those are newer than anything kept.
"""

from __future__ import annotations

from typing import Any

PRUNE_THREAD = """
WITH ranked AS (
    SELECT checkpoint_id, checkpoint,
           row_number() OVER (ORDER BY checkpoint_id DESC) AS newness
    FROM checkpoints
    WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s
), doomed AS (
    DELETE FROM checkpoints c
    USING ranked r
    WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s
      AND c.checkpoint_id = r.checkpoint_id AND r.newness > %(keep)s
    RETURNING c.checkpoint_id
), kept AS (
    SELECT checkpoint FROM ranked WHERE newness <= %(keep)s
), gone_writes AS (
    DELETE FROM checkpoint_writes w
    USING doomed d
    WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = %(ns)s
      AND w.checkpoint_id = d.checkpoint_id
    RETURNING 1
), gone_blobs AS (
    DELETE FROM checkpoint_blobs b
    WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
      AND NOT EXISTS (
          SELECT 1 FROM kept k WHERE k.checkpoint -> 'channel_versions' ->> b.channel = b.version
      )
      AND b.version < (SELECT max(k.checkpoint -> 'channel_versions' ->> b.channel) FROM kept k)
    RETURNING 1
)
SELECT (SELECT count(*) FROM doomed) AS checkpoints,
       (SELECT count(*) FROM gone_writes) AS writes,
       (SELECT count(*) FROM gone_blobs) AS blobs
"""


def prune_parameters(thread_id: str, checkpoint_ns: str, keep: int) -> dict[str, Any]:
    """The bind parameters of `PRUNE_THREAD` for one thread."""
    return {"thread": thread_id, "ns": checkpoint_ns, "keep": keep}
