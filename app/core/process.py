"""Who this process is, as the owner of the leases it holds: turns it runs (ADR 0016) and
documents it ingests (ADR 0017)."""

from __future__ import annotations

import os
import secrets
import socket

_IDS: dict[int, str] = {}


def new_owner_id() -> str:
    """A fresh owner id: host and pid for operators, a random tail so that a pid reused after
    a restart is not mistaken for the dead process."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


def process_id() -> str:
    """This process's owner id: stable for its life; a forked child gets its own."""
    pid = os.getpid()
    if pid not in _IDS:
        _IDS[pid] = new_owner_id()
    return _IDS[pid]
