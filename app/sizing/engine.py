"""``size(request)``: a short orchestration of the sizing modules.

request.py (validation) → search.py (node counts per SKU) → recommend.choose_plan (which
count each SKU shows) → options.py (one typed Option per SKU) → recommend.recommend (the
headline) → assumptions.py; results.py serialises it all to the JSON shape callers know.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from typing import Any

from app.catalog.specs import all_specs
from app.sizing import compute
from app.sizing.assumptions import CHECKPOINT_RANGE_BYTES, checkpoint_bytes_per_param, state_bytes
from app.sizing.capacity import largest_full_training_model
from app.sizing.messages import Msg, Translate, translator
from app.sizing.options import Option, evaluate_option, unbuildable_option
from app.sizing.params import count
from app.sizing.pinned import pinned_plans
from app.sizing.presets import PRESETS
from app.sizing.recommend import choose_plan, recommend, single_gpu
from app.sizing.request import Request, parse, resolve, validate
from app.sizing.results import SizingResult
from app.sizing.search import Delivery, SkuSearch, unit_price_cents

__all__ = [
    "REFERENCE_JOB",
    "largest_full_training_model",
    "list_presets",
    "parse",
    "reference_mfu",
    "size",
    "size_result",
]

LONG_CONTEXT = 32768
LONG_CONTEXT_LOGITS = 4e9
MFU_PUBLIC_MAX = 0.6
MFU_WARN = 0.7


def option_for(r: Request, search: SkuSearch) -> Option:
    """The option one SKU shows: its chosen plan evaluated (or why nothing fits)."""
    if not search.supported:
        return unbuildable_option(search, 1, Msg("note.no_fp4", {"name": search.spec.name}))
    if r.parallelism is not None:  # the customer's degrees at the counts worth comparing
        pinned, n, why = pinned_plans(search)
        if not pinned:
            assert why is not None
            return unbuildable_option(search, n, why)
        return evaluate_option(search, choose_plan(pinned, search), None)
    plans = search.plans()
    if not plans:
        return evaluate_option(search, search.closest(), None)
    plan = search.refined(choose_plan(plans, search))
    return evaluate_option(search, plan, search.runner_up(plan))


CACHE_SIZE = 512  # answers kept per process (the engine is pure: same request, same answer)
_CacheKey = tuple[str, tuple[tuple[str, int], ...], tuple[tuple[str, Delivery], ...], str]
_CACHE: OrderedDict[_CacheKey, SizingResult] = OrderedDict()
_LOCK = threading.Lock()


def size_result(
    request: Any,
    *,
    prices: dict[str, int] | None = None,
    delivery: Mapping[str, Delivery] | None = None,
    today: date | None = None,
) -> SizingResult:
    """Size a training job on every SKU (or the one asked for). Raises SizingError.

    ``delivery``: per SKU, the promised delivery of each node count (from the caller's
    stock; the engine reads no database): finish dates and deadlines count it. ``today``:
    the customer's date, for finish dates.

    Answers come from a bounded LRU cache keyed on the *normalised* request (defaults filled
    in, so a field given as its default or omitted is one entry), the prices, the delivery
    table and the day.
    """
    s = validate(request)
    key: _CacheKey = (
        s.model_dump_json(),
        tuple(sorted((prices or {}).items())),
        tuple(sorted((delivery or {}).items())),
        today.isoformat() if today else "",
    )
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    result = _compute(
        resolve(s), dict(key[1]) or None, dict(delivery) if delivery is not None else None, today
    )
    with _LOCK:
        _CACHE[key] = result
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


def cache_clear() -> None:
    with _LOCK:
        _CACHE.clear()


def cache_len() -> int:
    return len(_CACHE)


def _compute(
    r: Request,
    prices: dict[str, int] | None,
    delivery: dict[str, Delivery] | None = None,
    today: date | None = None,
) -> SizingResult:
    """The answer for a resolved request (no cache)."""
    j, c = r.job, r.job.counts
    flops = compute.training_flops(c.active, r.tokens, method=j.method)
    att = compute.attention_flops(j.arch, j.seq_len, r.tokens)
    if r.attention_flops:
        flops += att
    opt_b = state_bytes(j)[3]
    if j.method == "full":
        ckpt = compute.checkpoint_bytes(c.total, checkpoint_bytes_per_param(j))
        ckpt_range = [CHECKPOINT_RANGE_BYTES[0] * c.total, CHECKPOINT_RANGE_BYTES[1] * c.total]
    else:
        ckpt = compute.checkpoint_bytes(j.lora_params, 2.0 + 4.0 + opt_b)
        ckpt_range = [ckpt, ckpt]
    data = compute.dataset_bytes(r.tokens, j.arch.vocab_size, r.token_bytes)
    specs = {s.id: s for s in all_specs() if r.sku is None or s.id == r.sku}
    options: list[Option] = []
    for spec in specs.values():
        search = SkuSearch(
            r,
            spec,
            flops,
            unit_price_cents(spec, prices),
            # a SKU the table leaves out has no promised date for any count
            delivery=None if delivery is None else delivery.get(spec.id, ()),
            today=today,
        )
        o = option_for(r, search)
        if o.layout is not None:
            o.storage = compute.storage(
                checkpoint=ckpt,
                dataset=data,
                nodes=o.nodes,
                nvme_bytes_per_node=spec.nvme_bytes,
                egress_tb_month_per_node=spec.egress_tb_month,
            )
            if o.storage.get("dataset_fits_nvme") is False:
                o.notes.append(Msg("note.dataset_not_on_nvme"))
            elif o.storage.get("checkpoints_fit_on_nvme") == 0 and spec.nvme_bytes is not None:
                o.notes.append(Msg("note.no_checkpoint_on_nvme"))
        options.append(o)
    rec = recommend(options, r, specs, single_gpu(r, flops))
    warnings: list[Msg] = []
    best = rec.option
    if best is not None and best.extra["hourly_alternative_usd"] < (best.rental_cost_usd or 0):
        warnings.append(Msg("warning.hourly_cheaper"))
    if r.native_seq_len is not None:
        warnings.append(
            Msg(
                "warning.beyond_native_context",
                {"seq_len": j.seq_len, "max_seq_len": r.native_seq_len},
            )
        )
    if j.seq_len > LONG_CONTEXT and j.arch.vocab_size * j.seq_len > LONG_CONTEXT_LOGITS:
        warnings.append(Msg("warning.long_context_logits"))
    fitting = [o for o in options if o.fits and o.hours is not None]
    if fitting and min(o.hours or 0 for o in fitting) > 365 * 24:
        warnings.append(Msg("warning.over_a_year"))
    if r.mfu is not None and r.mfu > MFU_WARN:
        warnings.append(Msg("warning.mfu_high", {"mfu": r.mfu, "max": MFU_PUBLIC_MAX}))
    return SizingResult(
        request=r,
        flops=flops,
        attention_flops=att,
        checkpoint_bytes=ckpt,
        checkpoint_range_bytes=ckpt_range,
        dataset_bytes=data,
        options=options,
        recommendation=rec,
        warnings=warnings,
    )


def size(
    request: Any,
    *,
    prices: dict[str, int] | None = None,
    lang: str | None = None,
    translate: Translate | None = None,
    delivery: Mapping[str, Delivery] | None = None,
    today: date | None = None,
) -> dict[str, Any]:
    """Today's JSON answer; prose in ``lang`` (or through ``translate``), codes beside it."""
    result = size_result(request, prices=prices, delivery=delivery, today=today)
    return result.as_dict(translate or translator(lang))


def list_presets() -> list[dict[str, Any]]:
    out = []
    for p in PRESETS.values():
        c = count(p.arch)
        out.append(
            {
                "id": p.id,
                "name": p.name,
                "params": c.total,
                "active_params": c.active,
                "max_seq_len": p.max_seq_len,
                "moe": p.arch.moe is not None,
                "sources": dict(p.sources),
            }
        )
    return out


# The job a node's sustained figure is quoted for: one that fits on one node of every SKU
# (full training of Llama 3.1 8B in BF16 at 4k context, a trillion tokens), so the figure
# compares nodes and stacks rather than jobs.
REFERENCE_JOB: dict[str, Any] = {
    "model": {"preset": "llama-3.1-8b"},
    "tokens": 1e12,
    "seq_len": 4096,
    "precision": "bf16",
    "method": "full",
}


@lru_cache(maxsize=128)
def reference_mfu(sku_id: str, framework: str) -> float | None:
    """The sustained MFU (share of the node's dense BF16 peak) the engine predicts for
    ``REFERENCE_JOB`` on one node of ``sku_id`` under ``framework``: the figure the sizing
    answer's cards show for that job. None when that job does not fit there. Raises
    SizingError for an unknown node or framework."""
    req = {**REFERENCE_JOB, "sku": sku_id, "nodes": 1, "framework": framework, "rocm_ok": True}
    o = size_result(req).options[0]
    return o.mfu if o.fits and o.layout is not None else None
