"""Rendered quote PDFs: cached per quote version, and at most a few rendered at once.

A PDF costs 1–2 s of CPU (fpdf2 with an embedded CJK font); the share link is public, so
20 concurrent downloads used to stall the whole process. Now each (quote, version,
language) is rendered once per process and kept in a small LRU cache
(``cachetools.LRUCache``; it is not thread-safe, so reads and writes hold a lock), and at most
``MAX_RENDERS`` renders run at the same time — further requests wait briefly, then get a
503 with ``Retry-After`` instead of piling up.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Hashable
from typing import Any

from cachetools import LRUCache

from app.errors import N_, DomainError

MAX_RENDERS = 2
MAX_ENTRIES = 128
WAIT_SECONDS = 2.0


class RendererBusy(DomainError):
    status_code = 503
    code = "busy"
    default_message = N_("Too many PDFs are being prepared right now. Try again in a moment.")
    headers = {"Retry-After": "5"}  # noqa: RUF012 - constant


class PdfCache:
    def __init__(
        self,
        max_renders: int = MAX_RENDERS,
        max_entries: int = MAX_ENTRIES,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_renders)
        self._lock = threading.Lock()
        self._entries: LRUCache[Hashable, bytes] = LRUCache(maxsize=max_entries)
        self.wait_seconds = wait_seconds
        self.renders = 0  # how many times a PDF was actually built (tests, metrics)

    def _get(self, key: Hashable) -> bytes | None:
        with self._lock:
            return self._entries.get(key)

    def get_or_render(self, key: Hashable, render: Callable[[], bytes]) -> bytes:
        body = self._get(key)
        if body is not None:
            return body
        if not self._slots.acquire(timeout=self.wait_seconds):
            raise RendererBusy()
        try:
            body = self._get(key)  # rendered by another request while we waited
            if body is None:
                body = render()
                with self._lock:
                    self.renders += 1
                    self._entries[key] = body
            return body
        finally:
            self._slots.release()


def version_of(fields: dict[str, Any]) -> str:
    """A quote version: a digest of every field (any change, any database → a new key)."""
    raw = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()


CACHE = PdfCache()
