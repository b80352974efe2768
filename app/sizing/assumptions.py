"""What every answer assumes, as codes built from the constants they state (no copies)."""

from __future__ import annotations

from app.sizing import compute, layout
from app.sizing.memory import (
    CE_BYTES_PER_LOGIT,
    CUDA_CONTEXT_BYTES,
    FP8_WEIGHT_COPY_BYTES,
    FRAGMENTATION,
    NCCL_BYTES_PER_GROUP,
    SAFETY_MARGIN,
    Job,
    _state_bytes,
)
from app.sizing.messages import Msg
from app.sizing.profiles import profile
from app.sizing.recommend import NEAR_CHEAPEST
from app.sizing.request import Request
from app.sizing.stacks import NAMES, RELEASES

GIB = 2**30
CHECKPOINT_RANGE_BYTES = (12, 16)


def state_bytes(job: Job) -> tuple[float, float, float, float]:
    """(weights, gradients, master, optimizer) bytes per trainable parameter: the memory
    model's own figures, so what we state is what we compute."""
    return _state_bytes(job)


def checkpoint_bytes_per_param(job: Job) -> float:
    """A resumable checkpoint: 16-bit weights, the FP32 master copy and the optimizer state."""
    w, _g, master, opt = state_bytes(job)
    fp8 = FP8_WEIGHT_COPY_BYTES if job.precision == "fp8" else 0.0
    return (w - fp8) + master + opt


def _pct(x: float) -> int:
    return round(x * 100)


def assumptions(r: Request) -> list[Msg]:
    j = r.job
    w_b, g_b, master_b, opt_b = state_bytes(j)
    fp8_b = FP8_WEIGHT_COPY_BYTES if j.precision == "fp8" else 0.0
    out = [
        Msg("assumption.usable_memory", {"margin_pct": _pct(SAFETY_MARGIN)}),
        Msg(
            "assumption.model_states",
            {
                "weight_b": f"{w_b - fp8_b:g}",
                "fp8": Msg("assumption.fp8_copy", {"b": f"{fp8_b:g}"}) if fp8_b else "",
                "grad_b": f"{g_b:g}",
                "master": Msg("assumption.master_fp32", {"b": f"{master_b:g}"})
                if master_b
                else Msg("assumption.no_master"),
                "optimizer": Msg(
                    "assumption.adam8bit" if j.optimizer == "adamw8bit" else "assumption.adam",
                    {"b": f"{opt_b:g}"},
                ),
            },
        ),
        Msg("assumption.sharding"),
        Msg("assumption.activations"),
        Msg("assumption.logits", {"ce_b": CE_BYTES_PER_LOGIT}),
        Msg(
            "assumption.overhead",
            {
                "cuda_gib": CUDA_CONTEXT_BYTES / GIB,
                "nccl_gib": NCCL_BYTES_PER_GROUP / GIB,
                "frag_pct": _pct(FRAGMENTATION),
            },
        ),
        Msg(
            "assumption.flops",
            {  # LoRA's 4·N·T (no weight gradients), as the adapters line says
                "k": f"{compute.training_flops(1, 1.0, method=j.method):g}",
                "attention": Msg(
                    "assumption.attention_added"
                    if r.attention_flops
                    else "assumption.attention_apart"
                ),
            },
        ),
        Msg(
            "assumption.efficiency",
            {
                "full": layout.RECOMPUTE_EFF["full"],
                "selective": layout.RECOMPUTE_EFF["selective"],
                "tp8": layout.TP_EFF[8],
                "pp": layout.PP_EFF,
                "fsdp_nodes": layout.FSDP_ACROSS_NODES_EFF,
                "ep": layout.EP_EFF,
                "cp": layout.CP_EFF,
                "offload": layout.OFFLOAD_OPT_EFF,
            },
        ),
        Msg(
            "assumption.rental",
            {"hours": compute.HOURS_PER_MONTH, "tie_pct": _pct(NEAR_CHEAPEST)},
        ),
        Msg(
            "assumption.storage",
            {
                "ckpt_b": f"{checkpoint_bytes_per_param(j):g}",
                "lo_b": CHECKPOINT_RANGE_BYTES[0],
                "hi_b": CHECKPOINT_RANGE_BYTES[1],
            },
        ),
    ]
    if r.derived:
        a = j.arch
        out.append(
            Msg(
                "assumption.derived",
                {
                    "layers": a.num_layers,
                    "hidden": a.hidden_size,
                    "ffn": a.intermediate_size,
                    "vocab": a.vocab_size,
                },
            )
        )
    if j.method != "full":
        out.append(
            Msg(
                "assumption.adapters",
                {
                    "method": {"lora": "LoRA", "qlora": "QLoRA"}.get(j.method, j.method),
                    "base": "NF4" if j.method == "qlora" else "BF16",
                    "rank": j.lora_rank,
                    "k": f"{compute.training_flops(1, 1.0, method=j.method):g}",
                },
            )
        )
    if r.mfu is not None:  # the given MFU sets the time (the throughput model's line is out)
        i = next(k for k, m in enumerate(out) if m.code == "assumption.flops")
        out.insert(i + 1, Msg("assumption.time_given_mfu"))
    if r.mfu is None:  # the efficiency line follows: say where the time comes from first
        i = next(k for k, m in enumerate(out) if m.code == "assumption.efficiency")
        out.insert(i, Msg("assumption.time_model"))
        if j.batch_tokens:  # the request gave no batch: say which one the time assumes
            out.insert(
                i + 1,
                Msg(
                    "assumption.batch",
                    {
                        "mtokens": j.batch_tokens / 1e6,
                        "seqs": max(1, j.batch_tokens // j.seq_len),
                        "seq_len": j.seq_len,
                    },
                ),
            )
        elif j.global_batch_size:  # the request's batch: say how a layout rounds it
            out.insert(i + 1, Msg("assumption.global_batch", {"gbs": j.global_batch_size}))
    if r.parallelism is None:
        out.append(Msg("assumption.search"))
    if r.mfu is None:
        stack = profile(j.framework)
        out.append(
            Msg(
                "assumption.time_profile",
                {
                    "framework": NAMES[j.framework],
                    "fast_pct": round((stack.range_fast - 1) * 100),
                    "slow_pct": round((1 - stack.range_slow) * 100),
                },
            )
        )
        if stack.nearest is not None:
            out.append(
                Msg(
                    "assumption.time_nearest",
                    {"framework": NAMES[j.framework], "nearest": NAMES[stack.nearest]},
                )
            )
    # the release whose memory layout and speed the figures describe (the launch files are
    # written for the same one: app/sizing/stacks.py)
    out.append(Msg("assumption.release", {"release": RELEASES[j.framework]}))
    return out
