"""Content coding: which encoding a client accepts (``Accept-Encoding``, RFC 9110 §12.5.3).

The app compresses with gzip only (pages and fragments through ``Compress``; the
configurator's cached fragment is gzipped once per entry). ``br``/``zstd`` in a request
are understood as codings we do not offer, never as a reason to gzip.

Rules, case-insensitive:
- a coding with ``q=0`` is not acceptable ("gzip;q=0" forbids gzip, whatever else is listed);
- ``*`` stands for every coding not listed by name (``*;q=0`` forbids them);
- ``x-gzip`` means gzip;
- identity (no coding) is the fallback, always answered when gzip is not acceptable (we
  never refuse with 406); named with a higher q than gzip's, it is preferred;
- no header, an empty header or one we cannot read: uncompressed.
"""

from __future__ import annotations

from functools import lru_cache

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipMiddleware, GZipResponder, IdentityResponder
from starlette.types import Receive, Scope, Send

GZIP = "gzip"
IDENTITY = "identity"
# Compress leaves answers shorter than this as they are (and adds no Vary to them)
MINIMUM_SIZE = 800


def _qvalue(params: list[str]) -> float | None:
    """The weight among a coding's parameters: 1 when absent, None when unreadable."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() != "q":
            continue
        try:
            q = float(value.strip())
        except ValueError:
            return None
        if not 0.0 <= q <= 1.0:  # also rejects nan
            return None
        return q
    return 1.0


def accepted_codings(header: str) -> dict[str, float]:
    """Each coding named in an Accept-Encoding value with its weight (the highest when a
    coding is listed twice). An entry with an unreadable weight counts as ``q=0``:
    a malformed preference never turns compression on."""
    weights: dict[str, float] = {}
    for item in header.split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        if coding == "x-gzip":
            coding = GZIP
        q = _qvalue(params)
        weights[coding] = max(weights.get(coding, 0.0), 0.0 if q is None else q)
    return weights


@lru_cache(maxsize=256)  # browsers send a handful of distinct values; ~2 µs a parse
def choose_encoding(header: str | None, offered: tuple[str, ...] = (GZIP,)) -> str:
    """The coding to answer with: one of ``offered`` or ``"identity"``.

    The best-weighted acceptable offered coding wins; on a tie with identity the server
    compresses (the usual ``gzip, deflate, br`` lists no identity and means "compress")."""
    if not header or not header.strip():
        return IDENTITY
    weights = accepted_codings(header)
    star = weights.get("*", 0.0)
    best, best_q = IDENTITY, 0.0
    for coding in offered:
        q = weights.get(coding, star)
        if q > best_q:
            best, best_q = coding, q
    # identity competes only when named: left out, it is merely acceptable (the fallback)
    if weights.get(IDENTITY, 0.0) > best_q:
        return IDENTITY
    return best


def accepts_gzip(header: str | None) -> bool:
    return choose_encoding(header) == GZIP


class Compress(GZipMiddleware):
    """Starlette's gzip middleware, choosing by the parsed Accept-Encoding (Starlette's own
    looks for the substring "gzip", so ``gzip;q=0`` was answered in gzip)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("accept-encoding")
        responder: IdentityResponder
        if accepts_gzip(header):
            responder = GZipResponder(
                self.app,
                self.minimum_size,
                compresslevel=self.compresslevel,
                thread_minimum_size=self.thread_minimum_size,
                exclude_content_types=self.exclude_content_types,
            )
        else:
            responder = IdentityResponder(
                self.app, self.minimum_size, exclude_content_types=self.exclude_content_types
            )
        await responder(scope, receive, send)
