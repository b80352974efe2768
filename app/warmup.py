"""What a worker process does once before it serves: warm the engine, freeze the heap.

``uvicorn --factory app.main:asgi`` calls :func:`warm_process` once per worker. It answers
one sizing request (imports, the catalog, per-process tables) and then moves every object
alive at that point into the collector's permanent generation (``gc.freeze``): the modules,
templates and tables a process keeps for its whole life are no longer scanned by each full
collection, which otherwise took 30–45 ms of CPU inside whichever request triggered it
(measured on the sizing grid, docs/benchmarks-ab.md). ``bench.bench_search`` calls the same
function, so its figures are the server's.
"""

from __future__ import annotations

import gc
import logging

from app import sizing

log = logging.getLogger(__name__)

WARM_REQUEST = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}


def warm_process() -> None:

    try:
        sizing.size(dict(WARM_REQUEST))
    except Exception:  # a failed warm-up must not stop the worker: requests will warm it
        log.exception("sizing warm-up failed")
    gc.collect()
    gc.freeze()
