"""Rendered live-sizing fragments, kept per process and keyed on everything they depend on.

The htmx fragment of ``/size`` (results, out-of-band field errors and summary) is a pure
function of the canonical query, the reader's language and the list prices: it carries
nothing per user (no CSRF token, no signed-in controls, no dates or time zone), because
it is rendered from a context built for that purpose only (``routes._fragment``), never
from the page's base context. So the same key always gives the same bytes, and a bounded
LRU of them (``cachetools.LRUCache``) answers repeated typing without running the engine, the cards or Jinja.

The price version (``app.catalog.service``) is part of the key: a price change committed
by any process moves it, and every process renders afresh once it has read the new version.
Each process reads it at most once per ``fragment_price_max_age_ms`` (``PriceVersionMemo``,
200 ms by default): the read itself is cheap, but under load a thread that gives up the GIL
for a database call waits behind a thread computing a first answer, and that wait was the
largest cost of a cached answer (docs/benchmarks-ab.md, hfr2). A fragment rendered on a miss
is priced at the version in its key, which is not read a second time (prices the process
holds for a later version are used as they are), so it is never older than its key.

Within the interval a cached fragment does not even reach the route: ``CachedFragments``
(app/configurator/routes.py) answers it before the router and the thread pool. Reading the
version (a database call) is always left to the route, in a worker thread.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache
from prometheus_client import Counter

# ~30 KB each (+ ~5 KB gzipped once asked for): 512 fragments ≈ 18 MB per process at most.
CACHE_SIZE = 512

# Looked-up fragments by result ("hit"/"miss"), on /metrics: the hit rate under real typing.
LOOKUPS = Counter(
    "size_fragment_cache_lookups_total",
    "Live /size fragments looked up in the per-process cache of rendered fragments",
    ["result"],
)
_HIT, _MISS = LOOKUPS.labels("hit"), LOOKUPS.labels("miss")

# (canonical query, language, (price version, When)): When is the stock snapshot, the zone
# and the customer's day (delivery.When), so a price change, a stock change and the next
# day each render afresh
Key = tuple[str, str, Any]


@dataclass(slots=True)
class Fragment:
    status: int
    body: bytes
    _gzipped: bytes | None = None

    @property
    def compressed(self) -> bytes | None:
        """The gzipped body if it was made already (``gzipped`` makes it), else None."""
        return self._gzipped

    def gzipped(self) -> bytes:
        """The body gzip-compressed, once per fragment (not once per answer, as the app's
        GZip middleware would: ~0.6 ms for 30 KB, more than a whole /healthz request)."""
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.body, compresslevel=6, mtime=0)
        return self._gzipped


class FragmentCache:
    """A bounded, thread-safe LRU of rendered fragments (``cachetools.LRUCache`` under one
    lock) with hit/miss counters."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: LRUCache[Key, Fragment] = LRUCache(maxsize=size)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Key, *, count_miss: bool = True) -> Fragment | None:
        """The fragment under ``key`` (counted as a hit, now the most recently used), or
        None (a miss, counted unless ``count_miss`` is false: the early lookup that hands a
        miss on to the route)."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                if count_miss:
                    self.misses += 1
                    _MISS.inc()
                return None
            self.hits += 1
        _HIT.inc()
        return hit

    def put(self, key: Key, fragment: Fragment) -> None:
        with self._lock:
            self._items[key] = fragment

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._items)}


_MAKE_LOCK = threading.Lock()


def fragment_cache_of(holder: Any) -> FragmentCache:
    """The FragmentCache kept on ``holder`` (an app's ``state``), made on first use."""
    cache = getattr(holder, "size_fragments", None)
    if cache is None:
        with _MAKE_LOCK:
            cache = getattr(holder, "size_fragments", None)
            if cache is None:
                cache = holder.size_fragments = FragmentCache()
    return cache  # type: ignore[no-any-return]


class PriceVersionMemo:
    """The price version, read at most once per ``max_age_s`` seconds per process.

    ``now`` is a monotonic timer (an operational interval, not business time); tests pass
    their own. With ``max_age_s == 0`` every call reads; so does every call after a read
    that failed (``None``), until one succeeds."""

    def __init__(self, max_age_s: float, now: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self.now = now
        self._state: tuple[Any, float] | None = None  # (version, read at); swapped whole
        self._refresh_sent: float | None = None  # the "read at" whose refresh a caller took
        self.reads = 0

    def fresh(self) -> Any:
        """The version last read if it is still within the interval, else None: read
        nothing (the caller that may not wait for the database leaves the read to one that
        may, the route in a worker thread).

        Once the interval has passed, the first caller gets None and goes to read; callers
        after it keep the last value while that read runs, for at most one more interval.
        So a refresh sends one request to the route instead of every request that arrives
        before the read lands (16 connections did each 200 ms: docs/benchmarks-ab.md, "the
        fragment against the pre-house parent again"). Called on the event loop only."""
        state = self._state
        if state is None or self.max_age_s <= 0:
            return None
        age = self.now() - state[1]
        if 0 <= age < self.max_age_s:
            return state[0]
        if age < 2 * self.max_age_s and self._refresh_sent == state[1]:
            return state[0]  # one caller has gone to read it
        self._refresh_sent = state[1]
        return None

    def get(self, read: Callable[[], Any]) -> Any:
        t = self.now()
        state = self._state
        if state is not None and self.max_age_s > 0 and 0 <= t - state[1] < self.max_age_s:
            return state[0]
        value = read()
        if value is not None:  # a failed read (None) is not trusted for the interval
            self._state = (value, t)
        self.reads += 1
        return value


def price_version_memo_of(holder: Any, max_age_ms: int) -> PriceVersionMemo:
    """The PriceVersionMemo kept on ``holder`` (an app's ``state``), made on first use."""
    memo = getattr(holder, "price_version_memo", None)
    if memo is None:
        with _MAKE_LOCK:
            memo = getattr(holder, "price_version_memo", None)
            if memo is None:
                memo = holder.price_version_memo = PriceVersionMemo(max_age_ms / 1000)
    return memo  # type: ignore[no-any-return]
