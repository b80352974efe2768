"""Engine prediction vs published peak memory for every calibration case with memory.

``python -m bench.sizing_accuracy`` rewrites docs/sizing-accuracy.md. The cases come from
``shared/data/sizing-calibration.json`` (or the copy under tests/sizing/data); the mapping
from each case's published configuration to an engine layout is below, one entry per case,
with the interpretation stated. No case gets its own constant: the overhead model is global.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sizing.memory import (
    SAFETY_MARGIN,
    Job,
    Layout,
    Memory,
    fit_verdict,
    memory,
    memory_range,
)
from app.sizing.params import MLA, Architecture, MoE, count
from app.sizing.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = (
    ROOT / "shared" / "data" / "sizing-calibration.json",
    ROOT.parent / "shared" / "data" / "sizing-calibration.json",
    ROOT / "tests" / "sizing" / "data" / "sizing-calibration.json",
)
GIB = 1024**3
# usable (driver-reported) memory of the GPUs in the cases, GiB
GPU_USABLE_GIB = {"80GB": 79.6, "A6000": 47.5, "4090": 23.6}


PUBLIC = ROOT / "bench" / "data" / "memory-public.json"


def load_public() -> list[dict[str, Any]]:
    """The widened public memory set (bench/data/memory-public.json)."""
    return list(json.loads(PUBLIC.read_text(encoding="utf-8"))["cases"])


def public_mapping(case: dict[str, Any]) -> Mapping:
    cfg = dict(case["config"])
    return Mapping(
        usable_gib=float(case["gpu_usable_gib"]),
        interpretation=case["how_read"],
        not_modelled=case.get("not_modelled", ""),
        **cfg,
    )


def _architecture(d: dict[str, Any]) -> Architecture:
    """An Architecture from a case's ``arch`` fields (``moe`` and ``mla`` as nested objects)."""
    fields = {k: v for k, v in d.items() if k != "source"}
    if isinstance(fields.get("moe"), dict):
        fields["moe"] = MoE(**fields["moe"])
    if isinstance(fields.get("mla"), dict):
        fields["mla"] = MLA(**fields["mla"])
    return Architecture(**fields)


def load_cases() -> list[dict[str, Any]]:
    for p in CANDIDATES:
        if p.exists():
            data = json.loads(p.read_text(encoding="utf-8"))
            return list(data["measured_cases"])
    raise FileNotFoundError("sizing-calibration.json not found")


@dataclass(frozen=True)
class Mapping:
    preset: str
    method: str = "full"
    seq_len: int = 8192
    mbs: int = 1
    sharding: str = "zero1"
    shard_group: int | None = None  # None: the data-parallel size
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    recompute: str = "none"
    precision: str = "bf16"
    optimizer: str = "adamw"
    grad_dtype: str = "fp32"
    master_weights: bool = True
    offload_optimizer: bool = False
    offload_params: bool = False
    gpu: str = "80GB"
    usable_gib: float | None = None  # driver-reported capacity when the case states it
    framework: str = "megatron"
    compile: bool = False
    chunked_loss: bool = False
    activation_offload: bool = False
    optimizer_in_backward: bool = False
    cp: int = 1
    pp_schedule: str = "1f1b"
    virtual_stages: int = 1
    num_microbatches: int = 0
    interpretation: str = ""
    not_modelled: str = ""
    # a model with no product preset (e.g. a tutorial's GPT-2 shapes), as Architecture fields
    arch: dict[str, Any] | None = None


_MEG = "Megatron distributed optimizer = ZeRO-1 over DP; FP32 main grads; recompute none"
_TT = (
    "torchtune pure-BF16 recipe (no FP32 master, AdamW states in BF16); Llama 3.1 recipes "
    "default to the chunked cross-entropy loss"
)


def _fp(pp: int, dp: int, tp: int, **kw: Any) -> Mapping:
    return Mapping("llama-3.1-8b", pp=pp, dp=dp, tp=tp, interpretation=kw.pop("i", _MEG), **kw)


MAPPINGS: dict[str, Mapping] = {
    "fp-a800-8b-pp2dp4tp1": _fp(2, 4, 1),
    "fp-h100-8b-pp1dp4tp2": _fp(1, 4, 2),
    "fp-h100-8b-pp1dp4tp2-fp8": _fp(1, 4, 2, precision="fp8"),
    "fp-h100-8b-2x8-bf16": _fp(1, 8, 2),
    "fp-h100-8b-2x8-fp8": _fp(1, 8, 2, precision="fp8"),
    "fp-h100-8b-55x8-bf16": _fp(1, 220, 2),
    "fp-a800-8b-pp4dp2tp1": _fp(4, 2, 1),
    "fp-a800-8b-pp2dp2tp2": _fp(2, 2, 2),
    "fp-a800-8b-pp2dp1tp4": _fp(2, 1, 4),
    "fp-a800-8b-pp8dp1tp1": _fp(8, 1, 1),
    "fp-a800-8b-pp1dp1tp8": _fp(1, 1, 8),
    "fp-a800-8b-pp4dp1tp2": _fp(4, 1, 2),
    "fp-a800-8b-pp1dp8tp1-OOM": _fp(1, 8, 1),
    "fp-h100-70b-8x8": Mapping(
        "llama-3.1-70b",
        pp=4,
        dp=2,
        tp=8,
        interpretation=_MEG + "; Llama 3 70B has the Llama 3.1 70B shapes",
    ),
    "fp-h100-mixtral8x7b-4x8": Mapping(
        "mixtral-8x7b",
        seq_len=4096,
        mbs=3,
        pp=2,
        dp=2,
        tp=8,
        ep=1,
        recompute="selective",
        interpretation=_MEG.replace("recompute none", "selective recompute")
        + "; EP 1 (README; EP 8 would not divide DP 2)",
        not_modelled="MoE token-dispatch buffers beyond the routed copies",
    ),
    "fp-h800-l2-70b-amp-tp8pp4": Mapping(
        "llama-2-70b", seq_len=4096, tp=8, pp=4, dp=1, interpretation=_MEG
    ),
    "fp-h800-l2-70b-amp-tp4pp8": Mapping(
        "llama-2-70b", seq_len=4096, tp=4, pp=8, dp=1, interpretation=_MEG
    ),
    "fp-h800-l2-70b-amp-tp4pp8-gbs1024": Mapping(
        "llama-2-70b", seq_len=4096, tp=4, pp=8, dp=1, interpretation=_MEG
    ),
    "megatron-pr482-llama2-7b": Mapping(
        "llama-2-7b",
        seq_len=4096,
        mbs=2,
        pp=2,
        dp=8,
        sharding="zero1",
        interpretation="seq_len not stated: Llama 2's 4096 assumed; distributed optimizer "
        "assumed (not stated; without it FP32 grads + master + Adam and the in-flight "
        "activations exceed the 80 GB the run fitted in); metric read as torch max allocated",
    ),
    "tune-l31-70b-full-8xa100": Mapping(
        "llama-3.1-70b",
        seq_len=2048,
        mbs=2,
        sharding="zero3",
        dp=8,
        recompute="full",
        grad_dtype="bf16",
        master_weights=False,
        offload_optimizer=True,
        offload_params=True,
        framework="hf",
        chunked_loss=True,
        interpretation=_TT + "; FSDP over 8 with CPU offload of params and optimizer; "
        "activation checkpointing on (recipe default)",
        not_modelled="fused optimizer step, compile",
    ),
    "tune-l31-70b-lora-8xa100": Mapping(
        "llama-3.1-70b",
        method="lora",
        seq_len=2048,
        mbs=2,
        sharding="zero3",
        dp=8,
        recompute="full",
        grad_dtype="bf16",
        master_weights=False,
        framework="hf",
        chunked_loss=True,
        interpretation="LoRA rank 16 over FSDP 8; activation checkpointing on (recipe default)",
    ),
    "tune-l31-8b-full-a6000": Mapping(
        "llama-3.1-8b",
        seq_len=2048,
        mbs=2,
        sharding="ddp",
        recompute="full",
        grad_dtype="bf16",
        master_weights=False,
        optimizer="adamw8bit",
        gpu="A6000",
        framework="hf",
        optimizer_in_backward=True,
        chunked_loss=True,
        interpretation=_TT + "; single GPU; 8-bit paged AdamW; activation checkpointing on; "
        "optimizer step fused into backward (recipe default)",
    ),
    "tune-l31-8b-full-4090": Mapping(
        "llama-3.1-8b",
        seq_len=2048,
        mbs=2,
        sharding="ddp",
        recompute="full",
        grad_dtype="bf16",
        master_weights=False,
        optimizer="adamw8bit",
        offload_optimizer=True,
        gpu="4090",
        framework="hf",
        optimizer_in_backward=True,
        chunked_loss=True,
        interpretation=_TT + "; single 24 GB GPU; paged 8-bit AdamW read as optimizer offload; "
        "optimizer step fused into backward",
    ),
}

_L32 = "llama-3.2-3b"
_C = {"compile": True}
_CE = {**_C, "chunked_loss": True}
_AC = {**_CE, "recompute": "full"}
_OB = {**_AC, "optimizer_in_backward": True}
_OFF = {**_OB, "activation_offload": True}
_steps: list[tuple[str, dict[str, Any], str]] = [
    ("baseline", {}, ""),
    ("packed-dataset", {}, ""),
    ("compile", _C, ""),
    ("chunked-cross-entropy", _CE, ""),
    ("activation-checkpointing", _AC, ""),
    ("fuse-optimizer-step-into-backward", _OB, ""),
    ("activation-offloading", _OFF, ""),
    ("8-bit-adamw", {**_OFF, "optimizer": "adamw8bit"}, ""),
    ("lora", {**_CE, "method": "lora", "recompute": "full", "activation_offload": True}, ""),
    ("qlora", {**_CE, "method": "qlora", "recompute": "full", "activation_offload": True}, ""),
]
for _name, _kw, _nm in _steps:
    MAPPINGS[f"tune-l32-3b-{_name}"] = Mapping(
        _L32,
        seq_len=4096,
        mbs=2,
        sharding="ddp",
        grad_dtype="bf16",
        master_weights=False,
        framework="hf",
        interpretation=_TT
        + "; single A100; cumulative technique table (techniques of the rows above kept)"
        + (
            "; baseline is unpacked, so real sequences are shorter than 4096"
            if _name == "baseline"
            else ""
        ),
        not_modelled=_nm,
        **_kw,
    )


def metric_kind(case: dict[str, Any]) -> str:
    m = (case["measured"].get("memory_metric") or "").lower()
    return _kind(m)


def _kind(m: str) -> str:
    m = m.lower()
    if "nvidia-smi" in m:
        return "device (nvidia-smi)"
    if "reserved" in m:
        return "allocator reserved"
    if "active" in m:
        return "allocator active"
    return "allocator peak"


def metric_value(mem: Memory, kind: str) -> int:
    if kind.startswith("device"):
        return mem.total
    if kind == "allocator reserved":
        return mem.reserved
    return mem.allocated


def predict(mp: Mapping) -> tuple[Memory, Job, Layout]:
    arch = _architecture(mp.arch) if mp.arch else PRESETS[mp.preset].arch
    job = Job(
        arch,
        count(arch),
        mp.method,
        mp.seq_len,
        mp.precision,
        mp.optimizer,
        mp.grad_dtype,
        mp.master_weights,
        True,
        16,
        framework=mp.framework,
        compile=mp.compile,
        optimizer_in_backward=mp.optimizer_in_backward,
        activation_offload=mp.activation_offload,
        chunked_loss=mp.chunked_loss,
    )
    world = mp.tp * mp.pp * mp.dp * mp.cp
    sg = mp.shard_group if mp.shard_group is not None else (1 if mp.sharding == "ddp" else mp.dp)
    lay = Layout(
        mp.sharding,
        sg,
        mp.tp,
        mp.pp,
        mp.ep,
        mp.cp,
        mp.mbs,
        mp.recompute,
        mp.offload_optimizer,
        mp.offload_params,
        world,
        pp_schedule=mp.pp_schedule,
        virtual_stages=mp.virtual_stages,
        num_microbatches=mp.num_microbatches,
    )
    return memory(job, lay), job, lay


GROUPS = {
    "fp": "FlagPerf (Megatron-LM, nvidia-smi)",
    "megatron": "Megatron-LM PR #482 / tools/get_training_info README (allocator peak)",
    "tune": "torchtune README / recipes",
    "tt": "torchtitan issue and PR threads (FSDP2)",
    "atorch": "ATorch (dlrover) Llama 2 README: DeepSpeed TP x PP x ZeRO-1 (allocator peak)",
    "h200": "own H200 runs (tools/gpu_memory/measure.py): FSDP2 on one rank, op-level "
    "selective / full / no recompute, torch.compile (allocator reserved)",
    "tut": "Megatron-LM tutorial runs (vuiseng9/megatron-tutorials): 1F1B and interleaved PP, "
    "TP + SP, CP, MoE with EP (gpustat)",
}


def _row(
    cid: str,
    gpu: str,
    kind: str,
    metric_text: str,
    mp: Mapping,
    measured: float | None,
    outcome: str | None,
    source: str = "",
    device_gib: float | None = None,
) -> dict[str, Any]:
    mem, _job, _lay = predict(mp)
    pred = metric_value(mem, kind)
    lo, hi = memory_range(mem, pred)
    usable = (mp.usable_gib or GPU_USABLE_GIB[mp.gpu]) * GIB
    limit = usable * (1 - SAFETY_MARGIN)
    verdict = fit_verdict(mem, limit)
    row: dict[str, Any] = {
        "id": cid,
        "group": cid.split("-")[0],
        "gpu": gpu,
        "metric": kind,
        "metric_text": metric_text,
        "predicted_gib": pred / GIB,
        "low_gib": lo / GIB,
        "high_gib": hi / GIB,
        "predicted_total_gib": mem.total / GIB,
        "measured_gib": measured,
        "predicted_fits": mem.total <= limit,
        "fit": verdict,
        "observed": "OOM" if outcome and "OOM" in outcome else "ran",
        # a run whose measured device peak was itself above the product's planning limit
        # (usable x (1 - SAFETY_MARGIN)): `does_not_fit` is the product's stated answer
        "above_limit": bool(device_gib and device_gib * GIB > limit),
        "framework": mp.framework,
        "interpretation": mp.interpretation,
        "not_modelled": mp.not_modelled,
        "source": source,
    }
    if measured:
        row["error_pct"] = (pred / GIB - measured) / measured * 100
        row["inside"] = lo / GIB <= measured <= hi / GIB
    return row


def evaluate() -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for case in load_cases():
        if not case.get("has_measured_memory"):
            continue
        mp = MAPPINGS.get(case["id"])
        if mp is None:
            rows.append({"id": case["id"], "skipped": "no mapping"})
            continue
        m = case["measured"]
        rows.append(
            _row(
                case["id"],
                case["gpu"],
                metric_kind(case),
                m.get("memory_metric") or "",
                mp,
                m.get("peak_memory_gib"),
                m.get("outcome"),
                "shared/data/sizing-calibration.json",
            )
        )
    for case in load_public():
        rows.append(
            _row(
                case["id"],
                case["gpu"],
                _kind(case["metric"]),
                case["metric"],
                public_mapping(case),
                case.get("measured_gib"),
                case.get("outcome"),
                case["source"],
                case.get("measured_device_gib"),
            )
        )
    done = [r for r in rows if "error_pct" in r]
    errs = [abs(r["error_pct"]) for r in done]
    ran = [r for r in rows if r.get("observed") == "ran"]
    oom = [r for r in rows if r.get("observed") == "OOM"]
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in done:
        by_group.setdefault(r["group"], []).append(r)
    ratios = [r["high_gib"] / r["low_gib"] for r in rows if "high_gib" in r]
    return {
        "rows": rows,
        "median_abs_error_pct": statistics.median(errs),
        "mean_abs_error_pct": statistics.fmean(errs),
        "n_compared": len(errs),
        "n_public": len(load_public()),
        "n_excluded": len(json.loads(PUBLIC.read_text(encoding="utf-8")).get("excluded", [])),
        "inside_share": sum(1 for r in done if r["inside"]) / len(done),
        "max_range_ratio": max(ratios),
        "fit_agreement": sum(1 for r in ran if r["fit"] != "does_not_fit" or r["above_limit"])
        + sum(1 for r in oom if r["fit"] == "does_not_fit"),
        "n_verdicts": len(ran) + len(oom),
        "n_ran_above_limit": sum(1 for r in ran if r["above_limit"]),
        "oom_predicted_not_to_fit": all(r["fit"] == "does_not_fit" for r in oom) and bool(oom),
        "median_by_group": {
            k: statistics.median(abs(r["error_pct"]) for r in v) for k, v in by_group.items()
        },
        "inside_by_group": {
            k: sum(1 for r in v if r["inside"]) / len(v) for k, v in by_group.items()
        },
        "n_by_group": {k: len(v) for k, v in by_group.items()},
    }


TIME_START, TIME_END = "<!-- time-model:start -->", "<!-- time-model:end -->"


def render(res: dict[str, Any]) -> str:
    from app.sizing import memory as m

    pct = 100 * (1 - SAFETY_MARGIN)
    lines = [
        "# Sizing engine accuracy against published measurements",
        "",
        "Generated by `python -m bench.sizing_accuracy` (memory) and "
        "`python -m bench.throughput_accuracy` (time, its own section below). Do not edit by "
        "hand. Every figure compared is published by its source, named per row, except the "
        "`h200-` cases: our own runs on one H200 (`tools/gpu_memory/measure.py`, raw output "
        "in `tools/gpu_memory/results/`; the script is in the repository to reproduce them).",
        "",
        "## Memory per GPU",
        "",
        "Cases: `shared/data/sizing-calibration.json` (every case with `has_measured_memory`) "
        f"plus the widened public set `bench/data/memory-public.json` ({res['n_public']} "
        "published runs read from GitHub issue and PR threads and framework docs: FSDP2 / "
        "torchtitan with op-level selective checkpointing, context parallel, TP + FSDP, "
        "float8 and torch.compile, stated out-of-memory runs, Megatron-LM TP/PP runs, a "
        "Megatron-LM tutorial's 1F1B and interleaved (virtual-stage) pipeline, TP + SP and "
        "context-parallel runs and MoE runs with and without expert parallelism, and DeepSpeed "
        "TP x 1F1B-pipeline x ZeRO-1 runs; "
        f"{res['n_excluded']} more runs were read and left out, with the reason, below).",
        "",
        f"- cases compared: **{res['n_compared']}**; median absolute error "
        f"**{res['median_abs_error_pct']:.1f} %** (mean {res['mean_abs_error_pct']:.1f} %)",
        f"- measured value inside the predicted `[low, high]` range: "
        f"**{100 * res['inside_share']:.0f} %** of cases; widest range high/low = "
        f"{res['max_range_ratio']:.2f} (cap {m.MAX_RANGE_RATIO})",
        f"- fit verdicts agreeing with what happened: **{res['fit_agreement']} / "
        f"{res['n_verdicts']}** (a run that ran must be `fits` or `tight`, a stated OOM "
        f"`does_not_fit`; the limit is {pct:.0f} % of the GPU's usable memory; "
        f"{res['n_ran_above_limit']} runs ran while their measured device peak was itself "
        f"above that limit: for them `does_not_fit` (over the planning line) counts as right "
        "as well as `fits` or `tight` (it ran))",
        "- the stated out-of-memory cases are "
        + (
            "**predicted not to fit**"
            if res["oom_predicted_not_to_fit"]
            else "**NOT all predicted to fail**"
        ),
        "",
        "| source group | cases | median abs error | inside range |",
        "|---|---:|---:|---:|",
    ]
    for k in sorted(res["median_by_group"]):
        lines.append(
            f"| {GROUPS.get(k, k)} | {res['n_by_group'][k]} | "
            f"{res['median_by_group'][k]:.1f} % | {100 * res['inside_by_group'][k]:.0f} % |"
        )
    lines += [
        "",
        "### Which metric is compared",
        "",
        "- **device (nvidia-smi)** — FlagPerf's `mem` column and the Megatron-LM tutorial's "
        "gpustat reading: device memory in use, so it "
        "includes the CUDA context, NCCL buffers and the caching allocator's reserved-but-free "
        "blocks. Compared with the engine's **total**.",
        "- **allocator reserved** — torchtitan's `memory:` log field is "
        "`torch.cuda.max_memory_reserved`: allocations plus the allocator's cached slack, no "
        "context or NCCL. Compared with total − context − NCCL.",
        '- **allocator peak / active** — torchtune\'s "Peak Memory per GPU" / "Peak Memory '
        "Active\" and the Megatron PR's `Peak_Memory_Actual`: PyTorch allocator statistics. "
        "Compared with the engine's **allocated** figure = total − context − NCCL − "
        "fragmentation.",
        "",
        "### Framework profiles (request field `framework`, default `fsdp2`)",
        "",
    ]
    for fw in m.FRAMEWORKS.values():
        lines.append(
            f"- **{fw.id}** — {fw.doc}. Loss buffer {fw.loss_bytes_per_logit:g} B/logit "
            f"unchunked; allocator slack {fw.fragmentation * 100:.0f} % of activations and "
            f"buffers; CP ranks in the shard group: {'yes' if fw.shard_over_cp else 'no'}."
        )
    lines += [
        "",
        "### Global constants (none fitted to one run)",
        "",
        f"- CUDA context + kernels + cuBLAS workspaces: {m.CUDA_CONTEXT_BYTES / GIB:.2f} GiB",
        f"- NCCL: {m.NCCL_BYTES_PER_GROUP / GIB:.2f} GiB per parallel dimension in use "
        "(DP, TP, PP, EP, CP)",
        "- ZeRO-3/FSDP: two prefetched all-gathered units + one unit of gradients; FSDP2 "
        "with PP keeps the stage's weights gathered from forward to backward",
        f"- fused loss: {m.CE_BYTES_PER_LOGIT} B per logit; chunked loss "
        f"{m.CHUNKED_CE_BYTES_PER_LOGIT} B per logit",
        f"- FP8 weight copy {m.FP8_WEIGHT_COPY_BYTES:g} B/param; FP4 (NVFP4/MXFP4) copy "
        f"{m.FP4_WEIGHT_COPY_BYTES:g} B/param (4-bit values + 8-bit scale per 16, row- and "
        "column-wise) beside BF16 weights and FP32 masters",
        "- pipeline: the first stage holds min(pp, m) micro-batches (1F1B), "
        "pp + (pp−1)/v (interleaved, Megatron-LM's formula), all m (GPipe)",
        f"- activation offload keeps {m.OFFLOAD_RESIDENT_BLOCKS} blocks resident",
        f"- range: likely −{m.MODEL_SPREAD_LOW * 100:.0f} %/+{m.MODEL_SPREAD_HIGH * 100:.0f} % "
        f"of the whole, ±{m.ACT_SPREAD * 100:.0f} % of activations, "
        f"±{m.OVERHEAD_SPREAD * 100:.0f} % of overhead, narrowed to high/low ≤ "
        f"{m.MAX_RANGE_RATIO}; `tight` = likely under the limit, high above it",
        "",
        "Sources of the formulas: Korthikanti et al. 2022 (activation breakdown), "
        "Megatron-LM `theoretical_memory_usage.py` (distributed optimizer, interleaved "
        "in-flight micro-batches), the PyTorch FSDP2 `fully_shard` documentation (sharded FP32 "
        "parameters, reshard_after_forward), torchtitan's source (op-level SAC policy, "
        "loss on FP32 logits), DeepSpeed's ZeRO configuration defaults (bucket sizes).",
        "",
        "### Cases",
        "",
        "| case | GPU | metric | measured GiB | predicted GiB | range GiB | error | fit (observed) "
        "| how the case was read | source |",
        "|---|---|---|---:|---:|---|---:|---|---|---|",
    ]
    for r in res["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['id']} | | | | | | | | skipped: {r['skipped']} | |")
            continue
        meas = f"{r['measured_gib']:.1f}" if r["measured_gib"] is not None else "—"
        err = f"{r['error_pct']:+.1f} %" if "error_pct" in r else "—"
        rng = f"{r['low_gib']:.1f}–{r['high_gib']:.1f}"
        how = r["interpretation"] + (
            f"; not modelled: {r['not_modelled']}" if r["not_modelled"] else ""
        )
        lines.append(
            f"| {r['id']} | {r['gpu']} | {r['metric']} | {meas} | {r['predicted_gib']:.1f} | "
            f"{rng} | {err} | {r['fit']} ({r['observed']}) | {how} | {r['source']} |"
        )
    excluded = json.loads(PUBLIC.read_text(encoding="utf-8")).get("excluded", [])
    if excluded:
        lines += ["", "### Published runs read but left out", ""]
        for c in excluded:
            lines.append(f"- {c['id']} ({c['source']}): {c['excluded_reason']}")
    lines += [
        "",
        "### Reading the table",
        "",
        "- The FlagPerf rows leave activation checkpointing unresolved (the README mentions it, "
        "the launch script passes no flag); they are read as no recomputation.",
        "- The torchtune technique rows are cumulative; compile, chunked cross-entropy, the "
        "optimizer step fused into backward and activation offloading are modelled. The "
        "unpacked baseline trains on short real sequences, so a 4096-token prediction "
        "over-states it.",
        "- The Megatron-LM tutorial rows (`tut-`) use GPT-2 shapes that have no product "
        "preset; the bench builds their architecture from the tutorial's scripts. Its table "
        "gives whole GB from gpustat, read as thousands of MiB (±2.4 % if it meant GiB). "
        "Its interleaved rows run m = pp micro-batches, so the first stage holds every "
        "micro-batch whatever the number of virtual stages (as measured: 55-57 GB across "
        "v = 1 to 18).",
        *_moe_ep_gap(res),
        "- Not used, by design (the independent check): NVIDIA's Megatron-Bridge / NeMo "
        "performance summaries, torchtitan's `benchmarks/` folder and performance docs, "
        "torchao's float8 / low-precision / MoE benchmark tables.",
        "- Errors are (predicted − measured) / measured.",
        "",
    ]
    return "\n".join(lines)


def _moe_ep_gap(res: dict[str, Any]) -> list[str]:
    """The expert-parallel paragraph, with the figures of this run."""
    rows = {r["id"]: r for r in res["rows"] if "error_pct" in r}

    def err(ids: list[str]) -> str:
        v = sorted(rows[i]["error_pct"] for i in ids if i in rows)
        return f"{v[0]:+.0f} to {v[-1]:+.0f} %" if v else "n/a"

    pairs = (
        ("tut-olmoe-64e-r1-dist", "tut-olmoe-64e-r2-dist-ep8"),
        ("tut-olmoe-128e-r3-dist", "tut-olmoe-128e-r4-dist-ep8"),
    )
    saved = []
    for a, b in pairs:
        if a in rows and b in rows:
            meas = rows[a]["measured_gib"] - rows[b]["measured_gib"]
            pred = rows[a]["predicted_gib"] - rows[b]["predicted_gib"]
            saved.append(f"{meas:.1f} GiB measured vs {pred:.1f} predicted")
    ep = [i for i in rows if i.startswith("tut-olmoe") and "-ep" in i]
    no_ep = [i for i in rows if i.startswith("tut-olmoe") and "-ep" not in i]
    short = sorted(rows[i]["measured_gib"] - rows[i]["predicted_gib"] for i in ep)
    short_txt = f"{short[0]:.1f}-{short[-1]:.1f} GiB" if short else "n/a"
    inside = sum(1 for i in ep if rows[i]["inside"])
    mixtral = rows.get("fp-h100-mixtral8x7b-4x8")
    mix = f"{mixtral['error_pct']:+.0f} %" if mixtral else "n/a"
    return [
        "- MoE with expert parallelism, checked against Megatron-LM's source (core_r0.14.0, "
        "the tutorial's Dockerfile; TransformerEngine's permutation ops). Found and modelled: "
        "TEGroupedMLP multiplies the router's probabilities into the routed experts' "
        "activation output (moe/experts.py lines 902-904); a non-gated GeLU has no fused "
        "weighted kernel (line 872 fuses SwiGLU only; arguments.py line 888 turns GeLU "
        "fusion off without biases), so autograd keeps fc1's output, the activation output "
        "and the weighted product, one expert-width tensor per routed copy more than a "
        "dense MLP (the router's probs need their gradient even under RandomSTE forced "
        f"balancing). With it the tutorial's runs without EP are within {err(no_ep)}. "
        "Checked and found not to differ with EP: the fused permute, the chunk sort and "
        "the un-permute save only int32 index maps (TE `_moe_permute_mask_map`, "
        "`_moe_chunk_sort`, `_moe_unpermute_mask_map` without merging probs, which "
        "Megatron no longer passes), the all-to-all saves nothing and returns its input "
        "when EP is 1 (tensor_parallel/mappings.py `_AllToAll`), so the dispatched copies "
        "autograd keeps are the same with and without EP; expert parameters get their own "
        "grad buffer and the distributed optimizer shards their FP32 master + Adam over "
        "the expert data-parallel group (size 1 at EP 8), which the model does, and the "
        "measured slopes confirm it (about 7.8 B per expert parameter without EP, 18 B per "
        "local expert parameter with EP 8, as modelled).",
        "- Known gap, on the dangerous side: the EP 8 rows stay under-predicted by "
        f"{err(ep)}, short by {short_txt} whether 64, 128 or 256 experts; EP saves "
        f"{'; '.join(saved)}. The excess does not grow with the expert count, so it is not a "
        "state term. What the source "
        "leaves open is outside autograd: the extra NCCL communicators EP brings (the "
        "all-to-all group and the token-count all-gather group, which may hold NVLS buffers "
        "on NVSwitch systems unless `NCCL_NVLS_ENABLE=0`) and caching-allocator slack, since "
        "with EP every all-to-all receive buffer and expert tensor changes size with each "
        "layer's routing while without EP they are the same size every time. Megatron's "
        "MoE README (main, not core_r0.14.0) recommends `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` 'to "
        "prevent memory fragmentation' and `NCCL_NVLS_ENABLE=0` 'to prevent memory "
        "overhead'; the tutorial sets neither. No source sizes either, so no term was "
        f"added; {inside} of these {len(ep)} rows are inside their range and every fit "
        "verdict is right. The "
        f"FlagPerf Mixtral run ({mix}) has no EP (TP 8 x PP 2, gated SwiGLU experts), so "
        "it is a different gap, also unexplained.",
    ]


def write_doc(text: str) -> Path:
    """Write the memory part, keeping the time model's section (its own script writes it)."""
    out = ROOT / "docs" / "sizing-accuracy.md"
    if out.exists():
        old = out.read_text(encoding="utf-8")
        if TIME_START in old and TIME_END in old:
            block = old[old.index(TIME_START) : old.index(TIME_END) + len(TIME_END)]
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    out.write_text(text, encoding="utf-8")
    return out


def main() -> int:
    res = evaluate()
    out = write_doc(render(res))
    sys.stdout.write(
        f"median abs error {res['median_abs_error_pct']:.1f} % over {res['n_compared']} cases; "
        f"inside range {100 * res['inside_share']:.0f} %; "
        f"fit verdicts {res['fit_agreement']}/{res['n_verdicts']}; OOM case predicted not to "
        f"fit: {res['oom_predicted_not_to_fit']}\nwrote {out}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
