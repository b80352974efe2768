"""Parallel shapes: which (sharding, shard group, TP, PP, EP, CP) a job is offered at a
node count, in the page's rule order, and the efficiency heuristics of a layout (used when
a request pins the MFU; otherwise the throughput model ranks layouts). A layout the
customer's stack cannot run is never offered (app/sizing/profiles.py)."""

from __future__ import annotations

from typing import NamedTuple

from app.sizing.memory import Job, Layout, Memory
from app.sizing.messages import Msg
from app.sizing.profiles import profile
from app.sizing.splits import job_breaks, max_tp

# Throughput relative to the catalog MFU (which assumes a well-tuned single-node layout).
# Heuristics (ours), stated in every answer's assumptions and in docs/sizing.md.
RECOMPUTE_EFF = {"none": 1.0, "selective": 0.97, "full": 0.75}  # full: one extra forward
TP_EFF = {1: 1.0, 2: 0.97, 4: 0.94, 8: 0.90}
# best_layouts(family=...): variants tried past the ``want`` best for the families' representatives
REP_SCAN = 64
PP_EFF = 0.92  # 1F1B bubble with ≥ 4·pp micro-batches per step
FSDP_ACROSS_NODES_EFF = 0.90  # ZeRO-3 gathers over the inter-node network
EP_EFF = 0.95  # token all-to-all inside the NVLink domain
CP_EFF = 0.95
OFFLOAD_OPT_EFF = 0.70
OFFLOAD_PARAM_EFF = 0.50


# Named tuples, not dataclasses: the search makes tens of thousands per request (a shape list
# per node count, candidates per count), and a tuple is built in one step where a frozen
# dataclass sets each field through object.__setattr__ (and carries a __dict__ for the
# garbage collector to visit)
class Shape(NamedTuple):
    sharding: str
    shard_group: int
    tp: int
    pp: int
    ep: int
    cp: int
    label: Msg


class Candidate(NamedTuple):
    layout: Layout
    memory: Memory
    efficiency: float
    label: Msg
    rank: int


def efficiency(lay: Layout, gpus_per_node: int) -> float:
    e = RECOMPUTE_EFF[lay.recompute] * shape_efficiency(lay, gpus_per_node)
    if lay.offload_optimizer:
        e *= OFFLOAD_OPT_EFF
    if lay.offload_params:
        e *= OFFLOAD_PARAM_EFF
    return e


def _pows(limit: int) -> list[int]:
    out, x = [], 2
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def shapes(job: Job, nodes: int, g: int) -> list[Shape]:
    """Parallel shapes in the page's rule order for this model size (memoised per job;
    the list is shared: do not mutate it)."""
    key = ("shapes", nodes, g)
    got: list[Shape] | None = job.cache.get(key)
    if got is None:
        got = _shapes(job, nodes, g)
        job.cache.put(key, got)
    return got


# Shape labels are few (a code and small integers) and read-only: one Msg per distinct label
# for the process, instead of one (with its params dict) per shape per node count, which the
# job memos kept by the ten thousand for the garbage collector to visit on every full pass
_LABELS: dict[tuple[object, ...], Msg] = {}


def _label(code: str, params: dict[str, int] | None = None) -> Msg:
    # each code is made at one place with the same param names in the same order: the code
    # and the values are the key (no sort, no (name, value) pair per param)
    key = (code, *params.values()) if params else (code,)
    got = _LABELS.get(key)
    if got is None:
        got = _LABELS.setdefault(key, Msg(code, dict(params or {})))
    return got


def _shapes(job: Job, nodes: int, g: int) -> list[Shape]:
    a = job.arch
    w = nodes * g
    big = job.counts.total >= 60e9
    out: list[Shape] = []
    hsdp = _label("layout.hsdp_nodes" if nodes > 1 else "layout.hsdp")
    small_rules = [
        Shape("zero3", g, 1, 1, 1, 1, hsdp),
        Shape("ddp", 1, 1, 1, 1, 1, _label("layout.ddp")),
        Shape("zero1", w, 1, 1, 1, 1, _label("layout.zero1")),
        Shape("zero2", w, 1, 1, 1, 1, _label("layout.zero2")),
    ]
    if nodes > 1:
        small_rules.append(Shape("zero3", w, 1, 1, 1, 1, _label("layout.zero3_all")))
    tp_rules: list[Shape] = []
    # the widest TP inside the node (up to 8) that the heads, the KV heads and the sequence
    # split under: GQA with 4 KV heads gets TP 4, never 8 (app/sizing/splits.py)
    tp = max_tp(a, job.seq_len, min(8, g))
    if w % tp == 0:
        dp = w // tp
        tp_rules.append(
            Shape(
                "zero1",
                dp,
                tp,
                1,
                1,
                1,
                _label("layout.tp_zero1", {"tp": tp}),
            )
        )
        if dp > 1:
            tp_rules.append(
                Shape(
                    "zero3",
                    dp,
                    tp,
                    1,
                    1,
                    1,
                    _label("layout.tp_fsdp", {"tp": tp}),
                )
            )
        for pp in _pows(min(a.num_layers, dp, 32)):
            if dp % pp:
                continue
            lbl = _label(
                "layout.tp_pp_nodes" if tp * pp > g else "layout.tp_pp", {"tp": tp, "pp": pp}
            )
            tp_rules.append(Shape("zero1", dp // pp, tp, pp, 1, 1, lbl))
        for t in (2, 4):
            if t < tp and w % t == 0:
                tp_rules.append(
                    Shape("zero3", w // t, t, 1, 1, 1, _label("layout.tp_small_fsdp", {"tp": t}))
                )
    out = tp_rules + small_rules if big else small_rules + tp_rules
    if a.moe is not None:
        ep = max(
            e
            for e in range(1, min(g, a.moe.num_experts) + 1)
            if a.moe.num_experts % e == 0 and g % e == 0
        )
        moe: list[Shape] = []
        if ep > 1:
            moe.append(
                Shape(
                    "zero3",
                    w,
                    1,
                    1,
                    ep,
                    1,
                    _label("layout.ep_fsdp", {"ep": ep}),
                )
            )
            moe.append(
                Shape(
                    "zero1",
                    w,
                    1,
                    1,
                    ep,
                    1,
                    _label("layout.ep_zero1", {"ep": ep}),
                )
            )
            for pp in _pows(min(a.num_layers, w // ep)):
                if w % pp or (w // pp) % ep:
                    continue
                moe.append(
                    Shape(
                        "zero1",
                        w // pp,
                        1,
                        pp,
                        ep,
                        1,
                        _label("layout.ep_pp", {"ep": ep, "pp": pp}),
                    )
                )
            if tp > 1 and w % tp == 0 and g >= 8:
                for pp in [1, *_pows(min(a.num_layers, w // tp))]:
                    dp = w // (tp * pp)
                    if w % (tp * pp) or ep > dp:
                        continue
                    moe.append(
                        Shape(
                            "zero1",
                            dp,
                            tp,
                            pp,
                            ep,
                            1,
                            _label("layout.tp_ep_pp", {"tp": tp, "ep": ep, "pp": pp}),
                        )
                    )
        out = moe + out
    if job.seq_len >= 32768:
        for cp in (2, 4, 8):
            if w % cp == 0 and cp <= g:
                out.append(
                    Shape(
                        "zero3",
                        w // cp,
                        1,
                        1,
                        1,
                        cp,
                        _label("layout.cp", {"cp": cp}),
                    )
                )
    # a layout the customer's stack cannot run is never offered: one needing a kind of
    # parallelism it lacks (HF Trainer has no TP, PP, CP or EP; DeepSpeed's search has no TP
    # or CP: app/sizing/profiles.py) or one the model does not split evenly under
    # (app/sizing/splits.py: heads and KV heads by TP, layers by interleaved stages, ...)
    stack = profile(job.framework)
    return [
        x
        for x in out
        if stack.runs(x.tp, x.pp, x.ep, x.cp) and not job_breaks(job, x.tp, x.pp, x.ep, x.cp)
    ]


def shape_efficiency(s: Shape | Layout, g: int) -> float:
    e = TP_EFF.get(s.tp, 0.8)
    if s.pp > 1:
        e *= PP_EFF
    if s.sharding == "zero3" and s.shard_group * s.tp * s.cp > g:
        e *= FSDP_ACROSS_NODES_EFF
    if s.ep > 1:
        e *= EP_EFF
    if s.cp > 1:
        e *= CP_EFF
    return e
