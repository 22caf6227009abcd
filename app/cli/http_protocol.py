"""uvicorn's HTTP protocol with a deadline for a request's head.

uvicorn times out an idle keep-alive connection, but not a client that sends its request
line and headers a byte at a time: 400 such sockets were held open 40 s and more (issue 33,
item 10), each a file descriptor and a parser, the classic slow-headers attack. Here a
connection must deliver each request's head (request line and headers) within
`THREADLINE_HTTP_HEADER_TIMEOUT_SECONDS` (10 s) of its first byte (or of the connection opening),
else it is closed. Bodies and responses are not limited here: uploads have their size limit,
and streams their own heartbeats.
"""

from __future__ import annotations

import asyncio
from typing import cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.config import get_settings


def header_timeout() -> float:
    """The deadline, from the settings (each worker process reads its environment)."""
    return get_settings().http_header_timeout_seconds


class HeadDeadlineProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol`, closing a connection whose request head comes too slowly."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the clock for the first request's head."""
        super().connection_made(cast(asyncio.Transport, transport))  # TCP: a full transport
        self._arm()

    def on_message_begin(self) -> None:
        """A request's first byte: its head must be complete within the deadline."""
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        """The head arrived in time."""
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """No clock for a closed connection."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(header_timeout(), self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
