"""Typed results of a sizing run and their JSON shape (the one the API has always had)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.sizing.assumptions import assumptions
from app.sizing.messages import Msg, Translate, render_all
from app.sizing.options import Option
from app.sizing.params import Architecture, pick
from app.sizing.recommend import Recommendation
from app.sizing.request import Request


@dataclass
class SizingResult:
    request: Request
    flops: float
    attention_flops: float
    checkpoint_bytes: int
    checkpoint_range_bytes: list[int]
    dataset_bytes: int
    options: list[Option]
    recommendation: Recommendation
    warnings: list[Msg]

    def as_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        r = self.request
        j, c = r.job, r.job.counts
        notes = assumptions(r)
        rec = self.recommendation.as_dict(translate)
        return {
            "model": {
                "source": r.model_source,
                "derived_architecture": r.derived,
                "architecture": arch_dict(j.arch),
            },
            "params": c.total,
            "active_params": c.active,
            "trainable_params": c.total if j.method == "full" else j.lora_params,
            "training_flops": self.flops,
            "attention_flops": self.attention_flops,
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_range_bytes": self.checkpoint_range_bytes,
            "dataset_bytes": self.dataset_bytes,
            "options": [o.as_dict(translate) for o in self.options],
            "recommendation": rec,
            "single_gpu_offer": rec["single_gpu_offer"],
            "assumptions": render_all(notes, translate),
            "assumption_codes": [m.as_dict() for m in notes],
            "warnings": render_all(self.warnings, translate),
            "warning_codes": [m.as_dict() for m in self.warnings],
        }


# what an answer says of the model's architecture
_ARCH_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers",
              "num_attention_heads", "num_kv_heads", "head_dim", "tie_embeddings")  # fmt: skip
_MOE_KEYS = ("num_experts", "experts_per_token", "expert_intermediate_size", "shared_experts",
             "dense_layers")  # fmt: skip


def arch_dict(a: Architecture) -> dict[str, Any]:
    d = pick(a, _ARCH_KEYS)
    if a.moe is not None:
        d["moe"] = pick(a.moe, _MOE_KEYS)
    return d
