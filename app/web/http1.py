"""uvicorn's httptools parser with the request head bounded, as h11 bounds it.

``httptools`` (llhttp, C) parses a request for a fraction of the CPU of ``h11`` (pure
Python), which matters on the loop thread of a busy app process (docs/benchmarks-ab.md).
But uvicorn puts no bound on the request line and headers it lets httptools buffer: an
8 MB header was accepted with 200. h11 refuses anything over 16 KB. This protocol feeds
the parser at most ``MAX_HEAD_BYTES`` of a request's head and answers
``431 Request Header Fields Too Large`` (connection closed) past it, so a hostile client
costs at most 16 KB of memory per connection before the head is complete.

Served with ``uvicorn --http app.web.http1:BoundedHttpTools`` (Makefile, the test and
bench servers in tests/support/servers.py). Bodies are bounded by the app's BodyLimit
middleware (app/web/middleware.py), not here.

Counting: bytes are counted from the end of one request (or the connection's start) until
the parser reports the head complete. Data is fed in pieces no larger than the room left,
so the parser never sees more than the bound of one head; a piece that also holds the end
of the head and a body is counted whole (conservative by less than one bound).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# h11's default max_incomplete_event_size in uvicorn (request line + headers).
MAX_HEAD_BYTES = 16 * 1024

_BODY = b"Request header fields too large"
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\n"
    b"connection: close\r\n"
    b"\r\n%s" % (len(_BODY), _BODY)
)


class BoundedHttpTools(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # between requests the next byte starts a head
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        while data:
            if self._in_head:
                room = MAX_HEAD_BYTES - self._head_bytes
                if room <= 0:
                    self._refuse()
                    return
                piece = data[:room]  # the same object when all of it fits
                data = data[room:]
                self._head_bytes += len(piece)
            else:
                piece, data = data, b""
            super().data_received(piece)
            if self.parser is None or self.transport.is_closing():
                return  # refused by the parser (400) or the connection went away

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()

    def _refuse(self) -> None:
        self.logger.warning("Request head over %d bytes: refused with 431.", MAX_HEAD_BYTES)
        self.transport.write(_TOO_LARGE)
        self.transport.close()
