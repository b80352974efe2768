"""uvicorn's httptools parser with the request head bounded, as h11 bounds it.

``httptools`` (llhttp, C) parses a request for a fraction of the CPU of ``h11`` (pure
Python), which matters on the loop thread of a busy app process (docs/benchmarks-ab.md).
But uvicorn puts no bound on the request line and headers it lets httptools buffer: an
8 MB header was accepted with 200. h11 refuses anything over 16 KB. This protocol feeds
the parser at most ``MAX_HEAD_BYTES`` of a request's head and answers
``414 URI Too Long`` (the request line alone is over it) or ``431 Request Header Fields Too
Large`` (connection closed, a short text in English and Chinese) past it, so a hostile
client costs at most 16 KB of memory per connection before the head is complete.

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


def _refusal(status: bytes, english: str, chinese: str) -> bytes:
    """The whole answer, in both languages: the head is refused before its cookies or
    Accept-Language are read, so the reader's language is not known."""
    body = f"{english}\n{chinese}\n".encode()
    return (
        b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (status, len(body), body)
    )


# the request line alone is over the bound (a very long address, e.g. a pasted form field)
_URI_TOO_LONG = _refusal(
    b"414 URI Too Long",
    "The address is too long. Shorten what you typed into the form and try again.",
    "网址过长。请缩短您在表单中输入的内容后重试。",
)
_TOO_LARGE = _refusal(
    b"431 Request Header Fields Too Large",
    "The request headers are too large. Clear this site's cookies and try again.",
    "请求头过大。请清除本站的 Cookie 后重试。",
)


class BoundedHttpTools(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # between requests the next byte starts a head
        self._head_bytes = 0
        self._line_done = False  # the head's request line has ended (a newline was fed)

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
                self._line_done = self._line_done or b"\n" in piece
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
        self._line_done = False
        super().on_message_complete()

    def _refuse(self) -> None:
        status = 431 if self._line_done else 414
        self.logger.warning("Request head over %d bytes: refused with %d.", MAX_HEAD_BYTES, status)
        self.transport.write(_TOO_LARGE if self._line_done else _URI_TOO_LONG)
        self.transport.close()
