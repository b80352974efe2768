"""The largest dense model one node can train in full (the /nodes pages quote it)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from app.catalog.specs import all_specs
from app.sizing.errors import SizingError
from app.sizing.memory import SAFETY_MARGIN, Job, Layout, Memory, memory
from app.sizing.messages import Msg, render
from app.sizing.params import Architecture, ParamCounts, count, derive_architecture
from app.sizing.presets import PRESETS
from app.sizing.request import MAX_CUSTOM_SEQ, scaled_counts


@lru_cache(maxsize=64)
def largest_full_training_model(sku_id: str, seq_len: int = 4096) -> dict[str, Any]:
    """Largest dense model trainable in full (BF16 + FP32 master + AdamW, FSDP over one node,
    micro-batch 1, full recompute allowed, no offload) at ``seq_len``."""
    spec = next((s for s in all_specs() if s.id == sku_id), None)
    if spec is None:
        raise SizingError(
            "sku", Msg("request.unknown_sku", {"sku": sku_id, "skus": [s.id for s in all_specs()]})
        )
    if not 16 <= seq_len <= MAX_CUSTOM_SEQ:
        raise SizingError(
            "seq_len", Msg("request.range", {"lo": 16, "hi": MAX_CUSTOM_SEQ, "got": seq_len})
        )
    g = spec.gpus_per_node
    limit = spec.usable_gpu_memory_bytes * (1 - SAFETY_MARGIN)

    def job_for(arch: Architecture, counts: ParamCounts) -> Job:
        return Job(arch, counts, "full", seq_len, "bf16", "adamw", "bf16", True, True, 16)

    def fits_n(n: float) -> tuple[bool, Memory, str]:
        arch = derive_architecture(n)
        j = job_for(arch, scaled_counts(count(arch), int(n)))
        for rc in ("none", "selective", "full"):
            lay = Layout("zero3", g, 1, 1, 1, 1, 1, rc, False, False, g)
            m = memory(j, lay)
            if m.total <= limit:
                return True, m, rc
        return False, m, "full"

    lo, hi = 1e8, 5e12
    if not fits_n(lo)[0]:
        return {"sku": sku_id, "params": 0, "seq_len": seq_len, "largest_preset": None}
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if fits_n(mid)[0]:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.005:
            break
    ok, mem, rc = fits_n(lo)
    best_preset = None
    for p in sorted(PRESETS.values(), key=lambda p: count(p.arch).total):
        if p.arch.moe is not None or p.max_seq_len < seq_len:
            continue
        j = job_for(p.arch, count(p.arch))
        for rcp in ("none", "selective", "full"):
            if memory(j, Layout("zero3", g, 1, 1, 1, 1, 1, rcp, False, False, g)).total <= limit:
                best_preset = {
                    "id": p.id,
                    "name": p.name,
                    "params": count(p.arch).total,
                    "recompute": rcp,
                }
                break
    note = Msg("assumption.largest_model", {"margin_pct": round(SAFETY_MARGIN * 100)})
    return {
        "sku": sku_id,
        "params": int(lo),
        "seq_len": seq_len,
        "layout": {
            "sharding": "zero3",
            "shard_group": g,
            "tp": 1,
            "pp": 1,
            "micro_batch_size": 1,
            "recompute": rc,
            "offload_optimizer": False,
        },
        "memory_per_gpu_bytes": mem.as_dict(),
        "usable_gpu_memory_bytes": spec.usable_gpu_memory_bytes,
        "largest_preset": best_preset,
        "assumptions": [render(note)],
        "assumption_codes": [note.as_dict()],
    }
