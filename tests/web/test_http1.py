"""The app's HTTP/1.1 protocol (app/web/http1.py): httptools with the request head bounded.

A real uvicorn server in a thread with a tiny ASGI app that answers the body's length, and
raw sockets, so what is sent is exactly what the parser sees.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from app.web.http1 import MAX_HEAD_BYTES, BoundedHttpTools
from tests.support.servers import free_port


async def echo_length(scope, receive, send):  # type: ignore[no-untyped-def]
    assert scope["type"] == "http"
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = f"{scope['path']} {size}".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(
        echo_length,
        host="127.0.0.1",
        port=port,
        http=BoundedHttpTools,
        loop="asyncio",
        log_level="error",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(5)


def _read_all(s: socket.socket) -> bytes:
    s.settimeout(5)
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        out += chunk
    return out


def _exchange(port: int, *pieces: bytes, close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            for p in pieces:
                s.sendall(p)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while sending: what came back is still read
        if close:
            with contextlib.suppress(OSError):  # already closed by the server
                s.shutdown(socket.SHUT_WR)
        return _read_all(s)


def _get(path: str, extra: bytes = b"", close: bool = True) -> bytes:
    conn = b"Connection: close\r\n" if close else b""
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + conn + extra + b"\r\n"


def test_an_ordinary_request_is_answered(port: int) -> None:
    out = _exchange(port, _get("/a"))
    assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"/a 0")


def test_a_head_just_under_the_bound_is_answered(port: int) -> None:
    pad = b"X-Pad: " + b"a" * (MAX_HEAD_BYTES - 200) + b"\r\n"
    assert len(_get("/a", pad)) < MAX_HEAD_BYTES
    assert _exchange(port, _get("/a", pad)).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("size", [MAX_HEAD_BYTES + 1024, 1 << 20, 8 << 20])
def test_a_head_over_the_bound_is_refused_with_431_and_closed(port: int, size: int) -> None:
    pad = b"X-Pad: " + b"a" * size + b"\r\n"
    out = _exchange(port, _get("/a", pad))
    assert out.startswith(b"HTTP/1.1 431"), out[:80]
    assert b"connection: close" in out.lower()
    # the server answers on
    assert _exchange(port, _get("/b")).startswith(b"HTTP/1.1 200")


def test_an_address_over_the_bound_is_refused_with_414_in_both_languages(port: int) -> None:
    # a form field pasted full: the request line alone is over the bound; the language is
    # not known yet (the cookies come later in the head), so the text is in both
    out = _exchange(port, _get("/size?model=" + "x" * (100 * 1024)))
    assert out.startswith(b"HTTP/1.1 414"), out[:80]
    text = out.split(b"\r\n\r\n", 1)[1].decode()
    assert "The address is too long" in text and "网址过长" in text
    head = _exchange(port, _get("/a", b"X-Pad: " + b"a" * (2 * MAX_HEAD_BYTES) + b"\r\n"))
    assert "请求头过大" in head.split(b"\r\n\r\n", 1)[1].decode()
    assert _exchange(port, _get("/b")).startswith(b"HTTP/1.1 200")


def test_a_head_trickled_in_small_pieces_is_counted_across_them(port: int) -> None:
    head = _get("/a", b"X-Pad: " + b"a" * (2 * MAX_HEAD_BYTES) + b"\r\n")
    pieces = [head[i : i + 1000] for i in range(0, len(head), 1000)]
    assert _exchange(port, *pieces).startswith(b"HTTP/1.1 431")


def test_many_headers_each_small_are_bounded_together(port: int) -> None:
    many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 40) for i in range(1000))
    assert _exchange(port, _get("/a", many)).startswith(b"HTTP/1.1 431")


def test_a_large_body_in_the_same_packet_as_the_head_is_not_counted_as_head(port: int) -> None:
    body = b"z" * (1 << 20)
    req = (
        b"POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body
    out = _exchange(port, req)
    assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"/upload %d" % len(body))


def test_keep_alive_requests_each_get_their_own_bound(port: int) -> None:
    # five requests on one connection, each with a head of ~3/4 of the bound: together far
    # over it, each alone under it
    pad = b"X-Pad: " + b"a" * (MAX_HEAD_BYTES * 3 // 4) + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for i in range(5):
            s.sendall(_get(f"/k{i}", pad, close=False))
            got = b""
            while not got.endswith(b"/k%d 0" % i):
                chunk = s.recv(65536)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200")


def test_pipelined_requests_in_one_packet_are_all_answered(port: int) -> None:
    # (no half-close from the client: uvicorn's httptools protocol drops requests still
    # queued when the client shuts its side; the last request asks to close instead)
    out = _exchange(
        port, _get("/p1", close=False) + _get("/p2", close=False) + _get("/p3"), close=False
    )
    assert out.count(b"HTTP/1.1 200") == 3
    assert out.index(b"/p1 0") < out.index(b"/p2 0") < out.index(b"/p3 0")


def test_a_malformed_request_still_gets_400(port: int) -> None:
    assert _exchange(port, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
