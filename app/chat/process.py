"""This API process's identity, as the owner of the turns it runs (docs/adr/0016)."""

from __future__ import annotations

import os
import socket
import uuid

_IDS: dict[int, str] = {}


def process_id() -> str:
    """Unique per process, stable for its life; a forked child gets its own."""
    pid = os.getpid()
    if pid not in _IDS:
        _IDS[pid] = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    return _IDS[pid]
