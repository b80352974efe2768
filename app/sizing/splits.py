"""Whether a model splits evenly under a layout's parallel degrees: the checks a training
framework makes before it runs, so the search never offers (and the launch exporter never
receives) a layout the framework would refuse.

The rules, as Megatron-Core 0.19 and torchtitan (FSDP2 with DTensor TP, SP and CP) apply
them; HF Trainer and DeepSpeed run none of TP, PP, CP or EP here (``profiles.StackProfile.runs``):

- **Tensor parallel** divides the attention heads *and* the KV heads (query groups). Neither
  stack replicates KV heads for training: Megatron-Core's attention divides
  ``num_query_groups`` by the TP size and asserts it is whole; torchtitan shards the K/V
  projections column-wise by head. So GQA with 4 KV heads runs TP 1, 2 or 4, never 8.
- **Sequence parallel** (always on with TP in both stacks) splits the sequence over the TP
  ranks, and **context parallel** splits it into 2·CP load-balanced chunks: the sequence
  length is a multiple of CP × lcm(TP, 2) (CP > 1) or of TP (CP = 1).
- **Pipeline parallel** gives every (virtual) stage at least one layer; Megatron-Core's
  interleaved schedule needs the layers to divide evenly over PP × virtual stages (its
  1F1B schedule takes an uneven split through the first and last stages' counts).
- **Expert parallel** needs a mixture-of-experts model whose experts divide by EP.
"""

from __future__ import annotations

import math

from app.sizing.jobs import Job
from app.sizing.messages import Msg
from app.sizing.params import Architecture


def seq_unit(tp: int, cp: int) -> int:
    """The sequence length must be a multiple of this under TP (with SP) and CP."""
    return cp * math.lcm(tp, 2) if cp > 1 else tp


def breaks(
    arch: Architecture,
    degrees: tuple[int, int, int, int],
    seq_len: int,
    framework: str | None = None,
    pp_schedule: str = "1f1b",
    virtual_stages: int = 1,
) -> list[Msg]:
    """The rules above that the layout of these (TP, PP, EP, CP) degrees breaks for
    ``arch`` (empty: the framework can run it)."""
    tp, pp, ep, cp = degrees
    out: list[Msg] = []
    if tp > 1:
        if arch.num_attention_heads % tp:
            out.append(Msg("split.tp_heads", {"tp": tp, "heads": arch.num_attention_heads}))
        if arch.num_kv_heads % tp:
            out.append(Msg("split.tp_kv_heads", {"tp": tp, "kv_heads": arch.num_kv_heads}))
    unit = seq_unit(tp, cp)
    if seq_len % unit:
        out.append(Msg("split.seq", {"seq_len": seq_len, "unit": unit, "tp": tp, "cp": cp}))
    if pp > 1:
        stages = pp * (max(1, virtual_stages) if pp_schedule == "interleaved" else 1)
        if stages > arch.num_layers:
            out.append(Msg("split.pp_layers", {"stages": stages, "layers": arch.num_layers}))
        elif framework == "megatron" and stages > pp and arch.num_layers % stages:
            out.append(
                Msg("split.interleaved_layers", {"stages": stages, "layers": arch.num_layers})
            )
    if ep > 1:
        if arch.moe is None:
            out.append(Msg("split.ep_dense", {"ep": ep}))
        elif arch.moe.num_experts % ep:
            out.append(Msg("split.ep_experts", {"ep": ep, "experts": arch.moe.num_experts}))
    return out


def job_breaks(job: Job, tp: int, pp: int, ep: int, cp: int) -> list[Msg]:
    """:func:`breaks` for this job's model, sequence, framework and pipeline schedule."""
    fw, sched, v = job.framework, job.pp_schedule, job.virtual_stages
    return breaks(job.arch, (tp, pp, ep, cp), job.seq_len, fw, sched, v)


def max_tp(arch: Architecture, seq_len: int, limit: int) -> int:
    """The largest power-of-two tensor-parallel degree up to ``limit`` that ``arch`` splits
    under (heads, KV heads, sequence), 1 when none does."""
    t = 1
    while t * 2 <= limit:
        t *= 2
    while t > 1 and breaks(arch, (t, 1, 1, 1), seq_len):
        t //= 2
    return t
