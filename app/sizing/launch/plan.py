"""One option of a sizing answer, as the numbers every launch configuration is written from.

:func:`plan_of` reads the engine's typed answer (:class:`~app.sizing.results.SizingResult`,
its :class:`~app.sizing.options.Option` and the request's :class:`~app.sizing.memory.Job`)
and derives what a framework needs that the answer leaves implicit: the data-parallel split
into replicas and shards, the global batch as a whole number of micro-batches on every
data-parallel rank, and a whole number of layers on every pipeline stage.
:func:`invariants` states the rules every exported file must keep; the exporters and the
framework checks (``scripts/check_launch.py``) both run it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from app.catalog.specs import NodeSpec, spec
from app.sizing.launch.errors import N_, LaunchError
from app.sizing.messages import render
from app.sizing.params import Architecture, pick
from app.sizing.request import SizingRequest
from app.sizing.results import SizingResult
from app.sizing.splits import breaks
from app.sizing.throughput import DEFAULT_GLOBAL_BATCH_TOKENS

RDZV_PORT = 29500


@dataclass(frozen=True)
class Plan:
    """What one option asks a framework to run (every degree and batch a whole number)."""

    answer_id: str  # first 12 hex digits of the SHA-256 of the canonical request
    summary: str  # the request and the option in one line
    option_index: int
    sku: str
    sku_name: str
    vendor: str
    blackwell: bool  # NVIDIA Blackwell or later (no CUDA_DEVICE_MAX_CONNECTIONS rule)
    nodes: int
    gpus_per_node: int
    # model
    preset: str | None  # preset id, None for a bare parameter count or an architecture
    model_source: str  # preset id, "params" or "architecture"
    arch: Architecture
    params: int
    method: str
    seq_len: int
    precision: str
    optimizer: str
    compile: bool
    # layout
    sharding: str  # ddp | zero1 | zero2 | zero3
    tp: int
    pp: int
    cp: int
    ep: int
    dp: int
    dp_shard: int  # data-parallel ranks one copy of the model state is spread over
    dp_replicate: int  # copies of the sharded state (HSDP); dp = dp_shard × dp_replicate
    pp_schedule: str  # 1f1b | interleaved | gpipe
    virtual_stages: int
    micro_batch_size: int
    microbatches: int  # per optimizer step per data-parallel rank (pipeline or accumulation)
    global_batch_size: int  # sequences per optimizer step
    tokens: int  # the training budget the answer sized (sets the step count)
    recompute: str  # none | selective | full
    offload_optimizer: bool
    offload_params: bool
    # the engine's prediction
    fits: bool
    memory_bytes: int
    memory_range_bytes: tuple[int, int]
    tokens_per_s_per_gpu: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def train_steps(self) -> int:
        """Optimizer steps that train the sized token budget: the last step may run past it
        by less than one global batch."""
        return max(1, math.ceil(self.tokens / (self.global_batch_size * self.seq_len)))

    @property
    def warmup_steps(self) -> int:
        """Learning-rate warm-up: 1 % of the steps, at most 2,000 (DeepSeek-V3's warm-up,
        arXiv 2412.19437 section 4.2; Llama 3 405B warmed up for 8,000 of about 1.2 M steps,
        0.7 %, arXiv 2407.21783 section 3.4.1), at least one."""
        return max(1, min(2000, math.ceil(self.train_steps / 100)))

    @property
    def stages(self) -> int:
        return self.pp * (self.virtual_stages if self.pp_schedule == "interleaved" else 1)

    @property
    def layers_per_stage(self) -> list[int]:
        """Layers of each (virtual) stage in order: as even as whole numbers allow, the
        first stages one layer more where the count does not divide."""
        n, s = self.arch.num_layers, self.stages
        base, extra = divmod(n, s)
        return [base + (1 if i < extra else 0) for i in range(s)]

    def header(self, framework: str, version: str) -> list[str]:
        """The lines every file starts with (without a comment marker)."""
        lo, hi = self.memory_range_bytes
        tok = (
            f"{self.tokens_per_s_per_gpu:,.0f} tokens/s per GPU"
            if self.tokens_per_s_per_gpu is not None
            else "tokens/s per GPU: not modelled (the request pinned the MFU)"
        )
        lines = [
            f"Launch configuration for {framework} {version}, written by the sizing engine.",
            f"Engine answer {self.answer_id}: {self.summary}",
            f"Layout: {self.layout_text()}",
            f"Predicted memory per GPU: {self.memory_bytes / 1e9:.1f} GB "
            f"(range {lo / 1e9:.1f}-{hi / 1e9:.1f} GB); predicted throughput: {tok}.",
            "Compare the first steps' peak memory and tokens/s with these figures.",
            f"Steps: {_count(self.train_steps, 'optimizer step')} of "
            f"{self.global_batch_size:,} x {self.seq_len:,} tokens train the "
            f"{_count(self.tokens, 'token')} sized (learning-rate warm-up "
            f"{_count(self.warmup_steps, 'step')}).",
        ]
        if not self.fits:
            lines.append("WARNING: the engine predicts this layout does NOT fit in GPU memory.")
        lines += self.notes
        return lines

    def layout_text(self) -> str:
        parts = [f"{self.nodes} node(s) x {self.gpus_per_node} GPUs = {self.world}"]
        parts.append(f"TP {self.tp}, PP {self.pp}")
        if self.pp > 1:
            parts.append(f"{self.pp_schedule} schedule, {self.virtual_stages} stage(s) per rank")
        parts.append(f"CP {self.cp}, EP {self.ep}, DP {self.dp}")
        parts.append(f"{self.sharding} over {self.dp_shard} rank(s) x {self.dp_replicate}")
        parts.append(
            f"micro-batch {self.micro_batch_size} x {self.microbatches} = global batch "
            f"{self.global_batch_size} sequences of {self.seq_len} tokens"
        )
        parts.append(f"{self.precision}, recompute {self.recompute}")
        if self.offload_optimizer:
            parts.append("optimizer offloaded to CPU")
        if self.offload_params:
            parts.append("parameters offloaded to CPU")
        return "; ".join(parts)


def _count(n: int, word: str) -> str:
    """ "1 step", "2 steps" (the files' comments are English)."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def answer_id(request: SizingRequest) -> str:
    return hashlib.sha256(request.model_dump_json().encode()).hexdigest()[:12]


def _summary(req: SizingRequest, result: SizingResult, index: int) -> str:
    r = result.request
    o = result.options[index]
    model = r.model_source if r.model_source not in ("params", "architecture") else "custom model"
    if r.model_source == "params":
        model = f"{result.request.job.counts.total / 1e9:.1f}B parameters (derived shape)"
    return (
        f"{model}, {req.tokens:.3g} tokens, sequence {req.seq_len}, {req.method}, "
        f"{req.precision}, sized for {req.framework}; option {index}: {o.nodes} x {o.name}"
    )


def _blackwell(s: NodeSpec) -> bool:
    return s.vendor.lower() == "nvidia" and s.fp4_dense_tflops is not None


def plan_of(req: SizingRequest, result: SizingResult, index: int) -> Plan:
    """The plan for option ``index`` of ``result`` (``req``: the validated request)."""
    if not 0 <= index < len(result.options):
        raise LaunchError(
            "option_out_of_range",
            N_("There is no option %(index)s: this answer has %(count)s (0 to %(last)s)."),
            {"index": index, "count": len(result.options), "last": len(result.options) - 1},
            field="option",
        )
    o = result.options[index]
    if o.layout is None or o.memory is None:
        raise LaunchError(
            "option_without_layout",
            N_("Option %(index)s (%(name)s) has no layout that holds this job: nothing to launch."),
            {"index": index, "name": o.name},
            field="option",
        )
    job = result.request.job
    lay = o.layout
    s = spec(o.sku)
    g = o.gpus // o.nodes
    tp, pp, cp, ep = int(lay["tp"]), int(lay["pp"]), int(lay["cp"]), int(lay["ep"])
    dp = int(lay["dp"])
    sharding = str(lay["sharding"])
    group = int(lay["shard_group"])
    if sharding == "ddp":
        shard, replicate = 1, dp
    elif sharding == "zero3" and 1 <= group < dp and dp % group == 0:
        shard, replicate = group, dp // group
    else:
        shard, replicate = dp, 1
    mbs = int(lay["micro_batch_size"])
    schedule = str(lay.get("pp_schedule") or "1f1b") if pp > 1 else "1f1b"
    v = int(lay.get("virtual_stages") or 1) if schedule == "interleaved" else 1
    notes: list[str] = []
    unit = mbs * dp
    if job.global_batch_size:
        m = max(1, math.ceil(job.global_batch_size / unit))
        if m * unit != job.global_batch_size:
            notes.append(
                f"The requested global batch of {job.global_batch_size} sequences is not a "
                f"multiple of micro-batch x data-parallel size ({unit}): rounded up to "
                f"{m * unit}."
            )
    elif int(lay.get("num_microbatches") or 0) > 0:
        m = int(lay["num_microbatches"])
    elif job.num_microbatches:
        m = job.num_microbatches
    else:
        gbt = job.batch_tokens or DEFAULT_GLOBAL_BATCH_TOKENS
        m = max(1, math.ceil(gbt / (unit * job.seq_len)))
    if pp > 1:
        # a pipeline step needs at least one micro-batch per stage in flight; interleaved
        # schedules take them in rounds of pp
        want = max(m, pp)
        if schedule == "interleaved" and want % pp:
            want += pp - want % pp
        if want != m:
            notes.append(
                f"Micro-batches per step raised from {m} to {want} so the {schedule} "
                f"pipeline of {pp} stages has whole rounds."
            )
            m = want
    lo, hi = (int(x) for x in o.extra.get("memory_range_bytes") or (o.memory.total,) * 2)
    tok = o.extra.get("predicted_tokens_per_s_per_gpu")
    r = result.request
    return Plan(
        answer_id=answer_id(req),
        summary=_summary(req, result, index),
        option_index=index,
        sku=o.sku,
        sku_name=o.name,
        vendor=s.vendor,
        blackwell=_blackwell(s),
        nodes=o.nodes,
        gpus_per_node=g,
        preset=req.model.preset,
        model_source=r.model_source,
        arch=job.arch,
        params=job.counts.total,
        **pick(job, ("method", "seq_len", "precision", "optimizer", "compile")),
        sharding=sharding,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        dp=dp,
        dp_shard=shard,
        dp_replicate=replicate,
        pp_schedule=schedule,
        virtual_stages=v,
        micro_batch_size=mbs,
        microbatches=m,
        global_batch_size=m * unit,
        tokens=math.ceil(req.tokens),
        recompute=str(lay["recompute"]),
        offload_optimizer=bool(lay["offload_optimizer"]),
        offload_params=bool(lay["offload_params"]),
        fits=o.fits,
        memory_bytes=o.memory.total,
        memory_range_bytes=(lo, hi),
        tokens_per_s_per_gpu=float(tok) if tok is not None else None,
        notes=tuple(notes),
    )


def invariants(p: Plan) -> list[str]:
    """What every exported configuration keeps; the broken ones, in words (empty: all kept)."""
    bad: list[str] = []
    if p.tp * p.pp * p.cp * p.dp != p.world:
        bad.append(f"TP {p.tp} x PP {p.pp} x CP {p.cp} x DP {p.dp} != world {p.world}")
    if p.dp_shard * p.dp_replicate != p.dp:
        bad.append(f"shard {p.dp_shard} x replicate {p.dp_replicate} != DP {p.dp}")
    if p.global_batch_size % (p.micro_batch_size * p.dp):
        bad.append(
            f"global batch {p.global_batch_size} not divisible by micro-batch "
            f"{p.micro_batch_size} x DP {p.dp}"
        )
    if p.global_batch_size != p.micro_batch_size * p.dp * p.microbatches:
        bad.append("global batch != micro-batch x DP x micro-batches")
    per = p.layers_per_stage
    if sum(per) != p.arch.num_layers or min(per) < 1:
        bad.append(f"per-stage layer counts {per} do not cover {p.arch.num_layers} layers")
    if p.ep > 1 and (p.dp * p.cp * p.tp) % p.ep:
        bad.append(f"EP {p.ep} does not divide DP x CP x TP")
    # what every framework checks of the model's split (heads and KV heads by TP, the
    # sequence by TP and CP, layers by stages, experts by EP): app/sizing/splits.py
    degrees = (p.tp, p.pp, p.ep, p.cp)
    split = breaks(p.arch, degrees, p.seq_len, None, p.pp_schedule, p.virtual_stages)
    bad += [render(m) for m in split]
    if p.pp > 1 and p.microbatches < p.pp:
        bad.append(f"{p.microbatches} micro-batches cannot fill {p.pp} pipeline stages")
    per_step = p.global_batch_size * p.seq_len
    if not (p.train_steps - 1) * per_step < p.tokens <= p.train_steps * per_step:
        bad.append(f"{p.train_steps} steps of {per_step} tokens do not train {p.tokens} tokens")
    if not 1 <= p.warmup_steps <= p.train_steps:
        bad.append(f"a warm-up of {p.warmup_steps} steps in a run of {p.train_steps}")
    return bad
