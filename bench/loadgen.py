"""A light HTTP/1.1 load generator: asyncio streams, keep-alive, no HTTP library.

Each of ``concurrency`` connections sends one request, reads the whole response
(Content-Length or chunked), records the latency and sends the next one, for
``seconds``. Requests come from a list replayed in order (each connection starts at
its own offset), so a list of 240 distinct URLs is 240 distinct requests, not one
cached URL.

The client measures its own CPU (``resource.getrusage``) and the server's (psutil over
the server's process tree) during the run, so a report can show that the client was
not the bottleneck: a client using a small share of one core cannot cap the server.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import psutil


@dataclass
class Load:
    name: str
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    client_cpu: float = 0.0  # client CPU seconds / wall seconds (1.0 = one core)
    server_cpu: float = 0.0  # server process tree CPU seconds / wall seconds
    distinct: int = 0
    bytes_in: int = 0
    cache_hits: float = 0.0  # the server's own cache counters over the run, where it has any
    cache_misses: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        xs = sorted(self.latencies_ms)
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]

    @property
    def server_cpu_ms(self) -> float:
        """Server CPU milliseconds per request served."""
        return self.server_cpu * self.seconds * 1000 / self.requests if self.requests else 0.0

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    @property
    def repeat_rate(self) -> float:
        """Share of requests whose URL was already sent earlier in the run: the hit rate an
        unbounded cache keyed on the URL would have (the upper bound for any cache)."""
        return 1 - self.distinct / self.requests if self.requests else 0.0


def _tree_cpu(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, int]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = -1
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v)
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True
    n = len(head)
    if chunked:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            await reader.readexactly(size + 2)
            n += size
            if size == 0:
                break
    elif length > 0:
        await reader.readexactly(length)
        n += length
    return status, n


async def _run(
    host: str,
    port: int,
    requests: list[bytes],
    concurrency: int,
    seconds: float,
    load: Load,
) -> None:
    deadline = time.perf_counter() + seconds
    seen: set[int] = set()

    async def worker(i: int) -> None:
        k = (i * len(requests)) // concurrency
        reader = writer = None
        while time.perf_counter() < deadline:
            if writer is None:
                try:
                    reader, writer = await asyncio.open_connection(host, port)
                except OSError:
                    load.errors += 1
                    await asyncio.sleep(0.05)
                    continue
            assert reader is not None
            idx = k % len(requests)
            k += 1
            t0 = time.perf_counter()
            try:
                writer.write(requests[idx])
                status, n = await _read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                load.errors += 1
                writer.close()
                reader = writer = None
                continue
            load.latencies_ms.append((time.perf_counter() - t0) * 1000)
            load.statuses[status] += 1
            load.requests += 1
            load.bytes_in += n
            seen.add(idx)
        if writer is not None:
            writer.close()

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    load.distinct = len(seen)


def request_bytes(
    host: str,
    port: int,
    path: str,
    headers: dict[str, str] | None = None,
    *,
    method: str = "GET",
    body: bytes = b"",
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: keep-alive"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _send_once(
    targets: list[tuple[str, int]],
    requests: list[list[bytes]],
    concurrency: int,
    load: Load,
) -> None:
    """Each request sent exactly once: ``requests[t]`` go to ``targets[t]``; connection ``i``
    talks to target ``i % len(targets)`` and takes that target's next unsent request."""
    queues = [iter(rs) for rs in requests]

    async def worker(i: int) -> None:
        t = i % len(targets)
        host, port = targets[t]
        reader, writer = await asyncio.open_connection(host, port)
        for req in queues[t]:
            t0 = time.perf_counter()
            try:
                writer.write(req)
                status, n = await _read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                load.errors += 1  # not retried: a lost answer is counted, never resent
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            load.latencies_ms.append((time.perf_counter() - t0) * 1000)
            load.statuses[status] += 1
            load.requests += 1
            load.bytes_in += n
        writer.close()

    await asyncio.gather(*(worker(i) for i in range(concurrency)))


def send_once(
    name: str,
    targets: list[tuple[str, int]],
    requests: list[list[bytes]],
    *,
    server_pids: list[int],
    concurrency: int = 16,
) -> Load:
    """Send every prepared request exactly once (``requests[t]`` to ``targets[t]``, e.g. one
    app process each) over ``concurrency`` keep-alive connections spread over the targets;
    measure the client's CPU and the servers' over the same interval. For requests that
    must not repeat (paid checkouts: each has its own idempotency key)."""
    load = Load(name)
    load.distinct = sum(len(r) for r in requests)
    c0, t0 = _self_cpu(), time.perf_counter()
    s0 = sum(_tree_cpu(p) for p in server_pids)
    asyncio.run(_send_once(targets, requests, concurrency, load))
    load.seconds = time.perf_counter() - t0
    load.client_cpu = (_self_cpu() - c0) / load.seconds
    load.server_cpu = (sum(_tree_cpu(p) for p in server_pids) - s0) / load.seconds
    return load


def drive(
    name: str,
    url: str,
    paths: list[str],
    *,
    server_pid: int,
    concurrency: int = 16,
    seconds: float = 10.0,
    headers: dict[str, str] | None = None,
) -> Load:
    """GET ``paths`` (replayed in order) against ``url`` with ``concurrency`` keep-alive
    connections for ``seconds``; measure client and server CPU over the same interval."""
    hostport = url.split("://", 1)[1].rstrip("/")
    host, _, p = hostport.partition(":")
    port = int(p or 80)
    reqs = [request_bytes(host, port, path, headers) for path in paths]
    load = Load(name)
    c0, s0, t0 = _self_cpu(), _tree_cpu(server_pid), time.perf_counter()
    asyncio.run(_run(host, port, reqs, concurrency, seconds, load))
    load.seconds = time.perf_counter() - t0
    load.client_cpu = (_self_cpu() - c0) / load.seconds
    load.server_cpu = (_tree_cpu(server_pid) - s0) / load.seconds
    return load


def cores() -> int:
    return os.cpu_count() or 1
