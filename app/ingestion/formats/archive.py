"""Zip containers (DOCX, XLSX, PPTX, EPUB, ODT) opened with limits a zip bomb cannot pass.

Every member's declared size and compression ratio are checked before anything is read,
and `read` counts the bytes it inflates: Python's zipfile never inflates more than the
declared size (past it, the CRC check fails), so a member that lies about its size stops
at the limit too. The readers that open the archive themselves (python-docx, openpyxl,
python-pptx) get it only after `check` passed.
"""

from __future__ import annotations

import io
import zipfile

from app.ingestion.formats.base import ExtractionError

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 48 * 1024 * 1024
"""The largest part inflated (one XML part is parsed whole by some readers)."""
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_RATIO = 100
"""Inflated over compressed size; larger ratios are allowed for small members only."""
RATIO_FLOOR_BYTES = 1024 * 1024
READ_PIECE = 1024 * 1024


def check(data: bytes) -> zipfile.ZipFile:
    """The archive, once its members' sizes and ratios are within the limits."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ExtractionError(f"The file is not a readable zip container: {exc}") from exc
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise ExtractionError(
            f"The archive has {len(members)} parts; the limit is {MAX_MEMBERS} (a zip bomb?)."
        )
    total = 0
    for member in members:
        size = member.file_size
        total += size
        if size > MAX_MEMBER_BYTES:
            raise ExtractionError(
                f"The part {member.filename!r} inflates to {size} bytes; the limit is "
                f"{MAX_MEMBER_BYTES} (a zip bomb?)."
            )
        if size > RATIO_FLOOR_BYTES and size > MAX_RATIO * max(1, member.compress_size):
            raise ExtractionError(
                f"The part {member.filename!r} inflates {size // max(1, member.compress_size)} "
                f"times; the limit is {MAX_RATIO} (a zip bomb?)."
            )
    if total > MAX_TOTAL_BYTES:
        raise ExtractionError(
            f"The archive inflates to {total} bytes; the limit is {MAX_TOTAL_BYTES} (a zip bomb?)."
        )
    return archive


def read(archive: zipfile.ZipFile, name: str) -> bytes:
    """One member's bytes, inflated piece by piece and counted against the limit."""
    try:
        with archive.open(name) as member:
            pieces: list[bytes] = []
            size = 0
            while piece := member.read(READ_PIECE):
                size += len(piece)
                if size > MAX_MEMBER_BYTES:
                    raise ExtractionError(
                        f"The part {name!r} inflates past {MAX_MEMBER_BYTES} bytes (a zip bomb?)."
                    )
                pieces.append(piece)
            return b"".join(pieces)
    except KeyError as exc:
        raise ExtractionError(f"The archive has no part {name!r}.") from exc
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ExtractionError(f"The part {name!r} could not be read: {exc}") from exc


def names(data: bytes) -> set[str] | None:
    """The member names of a zip file, or None when `data` is not one (for sniffing)."""
    if not data.startswith(b"PK\x03\x04"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def first_member(data: bytes, name: str, limit: int = 256) -> bytes:
    """The first `limit` bytes of one member (the `mimetype` of EPUB and ODT)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive, archive.open(name) as member:
            return member.read(limit)
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return b""
