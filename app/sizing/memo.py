"""The engine's one memo type: pure results keyed by tuples, with one cap.

A request's job carries one (``memory.Job.cache``), shared by equal jobs sized recently
(``memory.with_shared_memo``): shapes, layouts, memory figures and throughput predictions
of the search, keyed on what each depends on. Every entry is a pure function of its key
and the job, so a shared or dropped entry changes no answer. A subclass of ``dict`` so that
look-ups stay the C-level ``dict.get`` the search calls tens of thousands of times.
"""

from __future__ import annotations

from typing import Any, TypeVar

# Entries kept per memo: beyond it new results are computed and not kept (a job's memo
# stays bounded however many node counts, SKUs and layouts are asked about).
MEMO_CAP = 20000

V = TypeVar("V")


class Memo(dict[Any, Any]):
    """A bounded memo: ``get`` as a dict, ``put`` keeps a result while under ``MEMO_CAP``."""

    __slots__ = ()

    def put(self, key: Any, value: V) -> V:
        if len(self) < MEMO_CAP:
            self[key] = value
        return value
