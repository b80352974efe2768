"""FLOPs, training time, storage/traffic and money (money in integer cents)."""

from __future__ import annotations

import math

from app.catalog.pricing import HOURS_PER_MONTH
from app.catalog.specs import NodeSpec
from app.money import cents_to_usd as cents_to_usd  # re-exported for the engine
from app.sizing.gpus import Hardware, dense_peak_tflops, hardware_from_spec
from app.sizing.memo import Memo
from app.sizing.memory import Job, Layout, offloaded_activation_bytes
from app.sizing.params import Architecture
from app.sizing.profiles import profile
from app.sizing.throughput import Setup, predict

HOURS_PER_WEEK = 168
TB = 1000**4


def training_flops(active_params: int, tokens: float, *, method: str = "full") -> float:
    """6·N·T (forward 2·N·T + backward 4·N·T); adapters skip weight gradients: 4·N·T."""
    per = 4.0 if method in ("lora", "qlora") else 6.0
    return per * active_params * tokens


def attention_flops(arch: Architecture, seq_len: int, tokens: float) -> float:
    """12·L·(heads·head_dim)·s per token (torchtitan / llm-foundry convention, no causal
    discount): the attention score and value matmuls that 6·N·T leaves out."""
    if arch.mla is not None:
        width = (
            arch.num_attention_heads
            * (arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim + arch.mla.v_head_dim)
            / 2
        )
    else:
        width = arch.num_attention_heads * arch.head_dim
    return 12.0 * arch.num_layers * width * seq_len * tokens


def training_seconds(flops: float, gpus: int, peak_tflops: float, mfu: float) -> float:
    return flops / (gpus * peak_tflops * 1e12 * mfu)


def rental_months(hours: float, *, min_months: int = 1) -> int:
    """Whole months per node (a month is 730 hours)."""
    return max(min_months, math.ceil(hours / HOURS_PER_MONTH - 1e-9))


def effective_cents_per_gpu_hour(node_month_cents: int, gpus: int, hours_used: float) -> float:
    """What a month of the node costs per GPU-hour actually used."""
    return node_month_cents / (gpus * hours_used)


def break_even_utilisation(node_month_cents: int, gpus: int, hourly_cents: int) -> float:
    """Share of the month above which the monthly node beats paying per GPU-hour elsewhere."""
    return node_month_cents / (gpus * HOURS_PER_MONTH * hourly_cents)


def checkpoint_bytes(params: int, bytes_per_param: float) -> int:
    return int(params * bytes_per_param)


def dataset_bytes(tokens: float, vocab_size: int, token_bytes: int | None = None) -> int:
    width = token_bytes if token_bytes else (2 if vocab_size <= 65536 else 4)
    return int(tokens * width)


def storage(
    *,
    checkpoint: int,
    dataset: int,
    nodes: int,
    nvme_bytes_per_node: int | None,
    egress_tb_month_per_node: float | None,
) -> dict[str, object]:
    """NVMe fit (dataset copied to every node, checkpoints written sharded across nodes)
    and weekly checkpoint egress against the monthly allowance."""
    out: dict[str, object] = {
        "checkpoint_bytes": checkpoint,
        "dataset_bytes": dataset,
        "nvme_bytes_per_node": nvme_bytes_per_node,
    }
    if nvme_bytes_per_node is not None:
        per_node_ckpt = checkpoint / max(1, nodes)
        free = nvme_bytes_per_node - dataset
        out["dataset_fits_nvme"] = free >= 0
        out["checkpoints_fit_on_nvme"] = max(0, int(free // per_node_ckpt)) if free > 0 else 0
    weekly = checkpoint * HOURS_PER_MONTH / HOURS_PER_WEEK
    out["weekly_checkpoint_egress_bytes_per_month"] = int(weekly)
    if egress_tb_month_per_node is not None:
        allowance = int(egress_tb_month_per_node * TB * max(1, nodes))
        out["egress_allowance_bytes_per_month"] = allowance
        out["weekly_checkpoint_egress_fits"] = weekly <= allowance
    return out


# --- time model ------------------------------------------------------------------------------


def peak_tflops(spec: NodeSpec, precision: str) -> float:
    """Dense peak per GPU of a catalog SKU for the training precision (the one rule,
    ``gpus.dense_peak_tflops``)."""
    return dense_peak_tflops(
        precision, spec.bf16_dense_tflops, spec.fp8_dense_tflops, spec.fp4_dense_tflops
    )


# per (job, SKU, attention convention): the SKU (its hardware is rebuilt if the catalog
# object changes), its hardware, (MFU, tokens/s) by layout, and the throughput model's
# per-token compute terms by the layout fields they read (throughput.predict's memo)
_MfuMemo = tuple[NodeSpec, Hardware, Memo, Memo]


def predicted_mfu(
    job: Job,
    lay: Layout,
    spec: NodeSpec,
    *,
    attention_counted: bool,
) -> tuple[float, float]:
    """(MFU, tokens/s per GPU): the throughput model's MFU for this layout on this SKU, in
    the engine's convention:
    model FLOPs per token (6·N_active, plus attention when the request counts it) × tokens/s
    per GPU ÷ the dense peak of the training precision. Adapters (LoRA/QLoRA) are priced at
    the full-training MFU on their 4·N FLOPs (they skip weight gradients).

    Memoised in the job's memo, per SKU and attention convention, by layout: every input of
    the prediction is a field of the job (equal jobs share the memo, see
    ``memory.with_shared_memo``: requests that differ only in token count share every
    layout's answer, except through the default batch the token count sets, which is in
    the memo's key), of the layout or of the SKU, so the key is the layout alone (one hash
    of it, not of the architecture and parameter counts besides). Two floats per entry (not
    the Throughput with its breakdown dict): a tuple of floats is not tracked by the garbage
    collector, and every tracked object kept here is visited by each full collection."""
    key = ("mfu", spec.id, attention_counted, job.batch_tokens)
    got: _MfuMemo | None = job.cache.get(key)
    if got is None or got[0] is not spec:
        # the per-token compute terms depend on neither the batch nor the attention
        # convention: one dict per SKU, shared by the MFU memos of every batch (token
        # budgets that set different default batches share them)
        pk = ("per_token", spec.id)
        shared: tuple[NodeSpec, Hardware, Memo] | None = job.cache.get(pk)
        if shared is None or shared[0] is not spec:
            shared = (spec, hardware_from_spec(spec), Memo())
            job.cache.put(pk, shared)
        got = (spec, shared[1], Memo(), shared[2])
        job.cache.put(key, got)
    known = got[2]
    hit = known.get(lay)
    if hit is None:
        hit = _predicted(job, lay, spec, got[1], attention_counted, got[3])
        known.put(lay, hit)
    return hit


_new_object = object.__new__
_set_attr = object.__setattr__


def setup_for(job: Job, lay: Layout) -> Setup:
    """The throughput model's Setup for ``lay`` in ``job``: ``Setup(...)`` built in one step
    (every field given, in field order; the frozen dataclass's __init__ sets its 16 fields
    one object.__setattr__ at a time, once per prediction). tests/sizing/test_search_pruning.py
    checks it against ``Setup(...)`` (equality, hash, repr), so a new field cannot be missed."""
    m = job.num_microbatches or None
    if not m and job.global_batch_size:
        dp = max(1, lay.world // (lay.tp * lay.pp * lay.cp))
        m = max(1, job.global_batch_size // (dp * lay.micro_batch_size))
    setup = _new_object(Setup)
    _set_attr(
        setup,
        "__dict__",
        {
            "world": lay.world,
            "tp": lay.tp,
            "pp": lay.pp,
            "ep": lay.ep,
            "cp": lay.cp,
            "sharding": lay.sharding,
            "shard_group": lay.shard_group,
            "micro_batch_size": lay.micro_batch_size,
            "recompute": lay.recompute,
            "offload_optimizer": lay.offload_optimizer,
            "offload_params": lay.offload_params,
            "num_microbatches": m,
            "pp_schedule": job.pp_schedule,
            "virtual_stages": job.virtual_stages,
            "activation_offload_bytes": offloaded_activation_bytes(job, lay),
            "frozen_base": job.method != "full",
        },
    )
    return setup


def _predicted(
    job: Job,
    lay: Layout,
    spec: NodeSpec,
    hw: Hardware,
    attention_counted: bool,
    per_token_memo: dict[tuple[int, int, int, int, str], tuple[float, float, float]],
) -> tuple[float, float]:
    arch, counts, seq_len, precision = job.arch, job.counts, job.seq_len, job.precision
    setup = setup_for(job, lay)
    tp = predict(
        arch,
        counts,
        seq_len,
        precision,
        setup,
        hw,
        global_batch_tokens=job.batch_tokens or None,
        per_token_memo=per_token_memo,
        profile=profile(job.framework),
        compiled=job.compile,
        op_sac=job.fw.op_sac,
    )
    # model FLOPs per token in the convention of training_flops: 6·N, or 4·N for adapters
    per_token = (6.0 if job.method == "full" else 4.0) * counts.active
    if attention_counted:
        per_token += attention_flops(arch, seq_len, 1.0)
    mfu = tp.tokens_per_s_per_gpu * per_token / (peak_tflops(spec, precision) * 1e12)
    return mfu, tp.tokens_per_s_per_gpu
