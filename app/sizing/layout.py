"""Layout candidates, their efficiency heuristics and the per-SKU search."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import MISSING, fields, replace
from typing import Any, NamedTuple

from app.sizing.memory import SAFETY_MARGIN, Job, Layout, Memory, fit_verdict, memory
from app.sizing.shapes import (
    CP_EFF,
    EP_EFF,
    FSDP_ACROSS_NODES_EFF,
    OFFLOAD_OPT_EFF,
    OFFLOAD_PARAM_EFF,
    PP_EFF,
    RECOMPUTE_EFF,
    REP_SCAN,
    TP_EFF,
    Candidate,
    Shape,
    efficiency,
    shape_efficiency,
    shapes,
)

__all__ = [
    "CP_EFF",
    "Candidate",
    "EP_EFF",
    "FSDP_ACROSS_NODES_EFF",
    "OFFLOAD_OPT_EFF",
    "OFFLOAD_PARAM_EFF",
    "PP_EFF",
    "RECOMPUTE_EFF",
    "REP_SCAN",
    "Shape",
    "TP_EFF",
    "efficiency",
    "shape_efficiency",
    "shapes",
]


def _shape_info(
    job: Job, nodes: int, g: int
) -> tuple[list[Shape], tuple[float, ...], tuple[tuple[object, ...] | None, ...]]:
    """(shapes, their static efficiencies, their kinds at this count), memoised per job
    with the shapes: every walk at this count (one per SKU, limit and ``want``) reads them."""
    key = ("shape_info", nodes, g)
    got: tuple[list[Shape], tuple[float, ...], tuple[Any, ...]] | None = job.cache.get(key)
    if got is None:
        all_shapes = shapes(job, nodes, g)
        world = nodes * g
        got = (
            all_shapes,
            tuple(shape_efficiency(s, g) for s in all_shapes),
            tuple(_kind_key(job, s, world) for s in all_shapes),
        )
        job.cache.put(key, got)
    return got


# A Layout built in one step: the frozen dataclass's own __init__ sets its 14 fields one
# object.__setattr__ at a time, and the search builds ~300 layouts per request (one per
# memory figure it asks for). The same instance dictionary, in field order, defaults last;
# tests/sizing/test_search_pruning.py checks it against Layout(...) (equality, hash, repr,
# replace) so a new Layout field cannot be missed here.
_LAYOUT_DEFAULTS = {f.name: f.default for f in fields(Layout) if f.default is not MISSING}
_new_object = object.__new__
_set_attr = object.__setattr__


def make_layout(
    s: Shape, *, world: int, mbs: int, recompute: str, offload_opt: bool, offload_params: bool
) -> Layout:
    lay = _new_object(Layout)
    _set_attr(
        lay,
        "__dict__",
        {
            "sharding": s.sharding,
            "shard_group": s.shard_group,
            "tp": s.tp,
            "pp": s.pp,
            "ep": s.ep,
            "cp": s.cp,
            "micro_batch_size": mbs,
            "recompute": recompute,
            "offload_optimizer": offload_opt,
            "offload_params": offload_params,
            "world": world,
            **_LAYOUT_DEFAULTS,
        },
    )
    return lay


def fits(mem: Memory, usable: int, host_ram: int | None, g: int) -> bool:
    return fits_bytes(mem.total, mem.cpu_offload_per_gpu, usable * (1 - SAFETY_MARGIN), host_ram, g)


def fits_bytes(total: int, cpu: int, limit: float, host_ram: int | None, g: int) -> bool:
    """GPU bytes under the limit, and any offloaded host bytes within the node's RAM."""
    if total > limit:
        return False
    if cpu:
        if host_ram is None:
            return False
        return cpu * g <= host_ram * 0.9
    return True


# A shard group no real layout reaches: the states divided by it round to nothing, so a
# layout's memory at this group is a floor for the same layout at every group of two or more.
FLOOR_SHARD_GROUP = 1 << 40


def memory_floor(job: Job, lay: Layout) -> Memory | None:
    """A lower bound on ``memory(job, lay)`` that no other shard group can undercut.

    Per-GPU memory never grows with the shard group (monotonicity, locked in by
    tests/sizing/test_search_pruning.py): states are divided by it, everything else
    (activations, context, NCCL groups, gather buffers) depends only on whether the group
    has two or more ranks. So the same layout with an unreachably large group holds at most
    what ``lay`` holds for every group ≥ 2 — and it is one memo entry per shape *kind*,
    shared by every node count (the world size is not in the memo key). None when the group
    is 1 (``ddp`` or a single rank), whose memory is already world-independent.
    """
    if lay.sharding == "ddp" or lay.shard_group < 2:
        return None
    return memory(job, replace(lay, shard_group=FLOOR_SHARD_GROUP))


class _Kind:
    """What is known about one shape kind in one variant (every count, one job): its
    memory floor and its evaluations so far, by shard group (ascending)."""

    __slots__ = ("by", "groups", "floor")

    def __init__(self, floor: int) -> None:
        self.floor = floor  # GPU bytes at FLOOR_SHARD_GROUP
        self.groups: list[int] = []
        # group -> the figure itself: the kind, the variant and the group are everything
        # memory() reads of a layout (its memo key, see _kind_key), so a count that meets a
        # group another count evaluated takes the figure without building a Layout
        self.by: dict[int, Memory] = {}


def _kind_key(job: Job, s: Shape, world: int) -> tuple[object, ...] | None:
    """What memory depends on besides the variant and the shard group, for shape ``s`` at
    this world size; None for ``ddp`` or a single-rank group (their memory does not depend
    on the count at all)."""
    if s.sharding == "ddp" or s.shard_group < 2:
        return None
    dp = world // (s.tp * s.pp * s.cp)
    # whether there is data parallelism (an NCCL group) and, when a global batch sets the
    # pipeline's micro-batch count, the data-parallel size itself
    per_dp = s.pp > 1 and job.global_batch_size and not job.num_microbatches
    return (s.sharding, s.tp, s.pp, s.ep, s.cp, dp if per_dp else dp > 1)


def _kind(
    job: Job, s: Shape, world: int, mbs: int, rc: str, off: bool, kk: tuple[object, ...] | None
) -> _Kind | None:
    """The shared record of shape ``s`` (group ≥ 2) in this variant, None for ``ddp`` or a
    single-rank group. ``kk``: ``_kind_key(job, s, world)`` (the count's shape info has it)."""
    if kk is None:
        return None
    key = ("kind", kk, mbs, rc, off)
    got: _Kind | None = job.cache.get(key)
    if got is None:
        # memory_floor of the layout (group ≥ 2 here), built at the floor's group directly
        lay = make_layout(
            s._replace(shard_group=FLOOR_SHARD_GROUP),
            world=world,
            mbs=mbs,
            recompute=rc,
            offload_opt=off,
            offload_params=False,
        )
        got = _Kind(memory(job, lay).total)
        job.cache.put(key, got)
    return got


_UNKNOWN = object()  # not yet looked up (a record may be None: ddp, single-rank group)


def _records(job: Job, kinds: tuple[Any, ...]) -> dict[Any, _Kind | None]:
    """(rank, variant) -> the kind's record (its floor, its known groups): depends on the
    sequence of kinds only, so kept per sequence, shared by every count (and SKU) that has
    it, filled as walks reach them."""
    rk = ("records", kinds)
    records: dict[Any, _Kind | None] | None = job.cache.get(rk)
    if records is None:
        records = {}
        job.cache.put(rk, records)
    return records


class _Probe:
    """Memory questions about the layouts of one node count, answered without evaluating
    ``memory()`` where the answer already follows from other evaluations.

    The monotonicity behind :func:`memory_floor` (per-GPU memory and host offload never
    grow with the shard group, for groups ≥ 2) means one evaluation at group ``d'`` bounds
    every other group ``d`` of the same shape kind and variant: ``d ≥ d'`` holds at most as
    much, ``d ≤ d'`` at least as much, and no group holds less than the floor. Each
    kind+variant keeps its evaluations in the job's memo (:class:`_Kind`); a question is
    answered from the floor and the nearest known groups on either side, or by one
    evaluation that joins them. Every answer is the one ``memory()`` itself gives.
    """

    def __init__(
        self,
        job: Job,
        world: int,
        limit: float,
        host_ram: int | None,
        g: int,
        shapes_: list[Shape],
        kind_keys: tuple[tuple[object, ...] | None, ...],
        kinds: dict[tuple[int, int, str, bool], _Kind | None] | None = None,
    ) -> None:
        self.job, self.world, self.limit, self.host, self.g = job, world, limit, host_ram, g
        self.shapes = shapes_
        self.kind_keys = kind_keys  # _kind_key of each shape at this count (_shape_info)
        # (rank, variant) -> its record; shared by the counts whose shapes have the same kinds
        self._kinds = {} if kinds is None else kinds
        self._mem: dict[tuple[int, int, str, bool], Memory] = {}

    def _kind(self, rank: int, mbs: int, rc: str, off: bool) -> _Kind | None:
        k = (rank, mbs, rc, off)
        got = self._kinds.get(k, _UNKNOWN)
        if got is _UNKNOWN:
            got = self._kinds[k] = _kind(
                self.job, self.shapes[rank], self.world, mbs, rc, off, self.kind_keys[rank]
            )
        return got  # type: ignore[return-value]

    def floor_over(self, rank: int, mbs: int, rc: str, off: bool) -> bool:
        """Whether this variant overflows the GPU at every shard group (its floor does)."""
        kind = self._kind(rank, mbs, rc, off)
        return kind is not None and kind.floor > self.limit

    def _fits(self, total: int, cpu: int) -> bool:
        return fits_bytes(total, cpu, self.limit, self.host, self.g)

    @staticmethod
    def _neighbours(kind: _Kind, d: int) -> tuple[Memory | None, Memory | None]:
        """Known figures at the largest group ≤ ``d`` and the smallest ≥ ``d``."""
        ds, by = kind.groups, kind.by
        if d in by:
            return by[d], by[d]
        i = bisect.bisect_left(ds, d)
        return (by[ds[i - 1]] if i > 0 else None), (by[ds[i]] if i < len(ds) else None)

    def over(self, rank: int, mbs: int, rc: str, off: bool, *, sure: bool = False) -> bool:
        """Whether this variant overflows the GPU (``sure``: False unless already known)."""
        kind = self._kind(rank, mbs, rc, off)
        if kind is not None:
            if kind.floor > self.limit:
                return True
            below, above = self._neighbours(kind, self.shapes[rank].shard_group)
            if above is not None and above.total > self.limit:
                return True
            if below is not None and below.total <= self.limit:
                return False
        if sure:
            return False
        return self.memory(rank, mbs, rc, off).total > self.limit

    def fits(self, rank: int, mbs: int, rc: str, off: bool) -> bool:
        """``fits()`` of this variant (GPU and host memory)."""
        kind = self._kind(rank, mbs, rc, off)
        if kind is not None:
            if kind.floor > self.limit:
                return False
            below, above = self._neighbours(kind, self.shapes[rank].shard_group)
            if below is not None and self._fits(below.total, below.cpu_offload_per_gpu):
                return True
            if above is not None and not self._fits(above.total, above.cpu_offload_per_gpu):
                return False
        m = self.memory(rank, mbs, rc, off)
        return self._fits(m.total, m.cpu_offload_per_gpu)

    def memory(self, rank: int, mbs: int, rc: str, off: bool) -> Memory:
        k = (rank, mbs, rc, off)
        m = self._mem.get(k)
        if m is None:
            s = self.shapes[rank]
            kind = self._kind(rank, mbs, rc, off)
            if kind is not None:
                m = kind.by.get(s.shard_group)
                if m is not None:
                    self._mem[k] = m
                    return m
            lay = make_layout(
                s, world=self.world, mbs=mbs, recompute=rc, offload_opt=off, offload_params=False
            )
            m = self._mem[k] = memory(self.job, lay)
            if kind is not None and s.shard_group not in kind.by:
                # the figure first, then a new group list (never changed in place): a
                # request reading the shared record from another thread sees a sorted list
                # whose every group has its figure
                kind.by[s.shard_group] = m
                groups = list(kind.groups)
                bisect.insort(groups, s.shard_group)
                kind.groups = groups
        return m


# A family of layouts: what the static order cannot rank for the throughput model, so that
# :func:`best_layouts` proposes one layout of each (``family=``).
Family = Callable[[Shape | Layout], Hashable]


def zero3_and_ep(s: Shape | Layout) -> Hashable:
    """Whether the parameters are ZeRO-3 sharded (gathered again for every micro-batch of a
    step, which the order's flat factor for ZeRO-3 across nodes does not see) and whether
    the experts are spread by EP (the order's flat EP factor cannot tell a MoE whose experts
    must be spread from a dense model)."""
    return s.sharding == "zero3", s.ep > 1


def tp_ep_zero3(s: Shape | Layout) -> Hashable:
    """The TP and EP degrees as well (a MoE's small expert GEMMs suffer under TP, or its
    experts must be spread by EP), and ZeRO-3 or not."""
    return (s.tp, s.ep, s.sharding == "zero3")


class Variants(NamedTuple):
    """Where one SKU's layouts must fit, and the variants of each shape the walk tries."""

    g: int  # GPUs per node
    usable: int  # usable GPU memory, bytes
    host_ram: int | None  # node RAM for offload, bytes (None: no offload)
    mbs_options: tuple[int, ...]
    recompute_options: tuple[str, ...]  # the leanest last
    offload_options: tuple[bool, ...]  # the leanest last

    def offloads(self) -> tuple[bool, ...]:
        """The offload options a node can take (none without host RAM figures)."""
        if self.host_ram is None:
            return tuple(o for o in self.offload_options if not o) or self.offload_options
        return self.offload_options


def best_layouts(
    job: Job,
    v: Variants,
    nodes: int,
    *,
    want: int = 2,
    family: Family | None = None,
    scan: int = REP_SCAN,
) -> list[Candidate]:
    """The best ``want`` fitting layouts (distinct shapes) for this node count, best first.

    ``family``: also the heuristically best surely-fitting layout of every family that has
    one (after the ``want`` best; :func:`zero3_and_ep`, :func:`tp_ep_zero3`), for a caller
    that ranks them with the throughput model: the static order cannot tell a MoE whose
    small expert GEMMs suffer under TP, or whose experts must be spread by EP, from a dense
    model, nor what ZeRO-3's gathers cost when every micro-batch of a step gathers the
    parameters again, so every family gets a representative among the ``scan`` variants
    after the ``want``-th.

    A combination whose memory floor (:func:`memory_floor`) already overflows the GPU is
    treated as the miss it is without evaluating its memory at this count: the answer is
    the one the plain walk gives, with most evaluations shared across node counts.
    """
    g, usable, host_ram = v.g, v.usable, v.host_ram
    mbs_options, recompute_options, offload_options = (
        v.mbs_options,
        v.recompute_options,
        v.offloads(),
    )
    world = nodes * g
    all_shapes, effs, kinds = _shape_info(job, nodes, g)
    # the order depends only on the shapes' efficiencies (and the options): one sort per
    # distinct sequence, shared by every count that has it
    ck = ("combos", effs, mbs_options, recompute_options, offload_options)
    combos: list[tuple[float, int, int, str, bool]] | None = job.cache.get(ck)
    if combos is None:
        combos = []
        for rank, se in enumerate(effs):
            for mbs in mbs_options:
                for rc in recompute_options:
                    re = se * RECOMPUTE_EFF[rc]
                    for off in offload_options:
                        combos.append((re * (OFFLOAD_OPT_EFF if off else 1.0), rank, mbs, rc, off))
        # most efficient first; on ties, the page's rule order, then larger micro-batch
        combos.sort(key=lambda c: (-c[0], c[1], -c[2]))
        job.cache.put(ck, combos)
    found: list[Candidate] = []
    # a variant whose upper memory estimate also fits beats a tight one (issue 16); the
    # first tight variant of each shape is kept in case nothing fits for sure
    tight: dict[int, Candidate] = {}
    limit = usable * (1 - SAFETY_MARGIN)
    lean_rc, lean_off, lean_mbs = recompute_options[-1], offload_options[-1], min(mbs_options)
    lean = (lean_mbs, lean_rc, lean_off)
    probe = _Probe(job, world, limit, host_ram, g, all_shapes, kinds, _records(job, kinds))
    # whether a variant's floor overflows the GPU (then it does at every count): per rank
    # for the leanest variant, per combination otherwise; filled as walks reach them
    # (dictionaries of booleans: the garbage collector does not track them)
    wk = ("walk", ck, kinds, limit)
    walk: tuple[dict[int, bool], dict[int, bool]] | None = job.cache.get(wk)
    if walk is None:
        walk = ({}, {})
        job.cache.put(wk, walk)
    lean_floor, floor = walk
    # family: one sure representative per family; ``left``: how many shapes of each family
    # are not yet out (a family whose shapes are all out needs no representative)
    reps: dict[Hashable, Candidate] = {}
    fam: list[Hashable] = []
    left: dict[Hashable, int] = {}
    if family is not None:
        fk = ("families", nodes, g, family)
        got = job.cache.get(fk)
        if got is None:
            fams = [family(s) for s in all_shapes]
            got = (fams, Counter(fams))
            job.cache.put(fk, got)
        fam, left = got[0], dict(got[1])
    have: set[Hashable] = set()  # the families of ``found`` and ``reps``
    dead: set[int] = set()

    def out(rank: int) -> None:
        if rank not in dead:
            dead.add(rank)
            if fam:
                left[fam[rank]] -= 1

    alive: set[int] = set()  # shapes whose leanest variant fits on the GPU
    lean_fits: dict[int, bool] = {}

    full_at: int | None = None  # index at which ``want`` layouts were found
    for i, (eff, rank, mbs, rc, off) in enumerate(combos):
        if full_at is not None and i - full_at > scan:
            break  # family: the representatives' search is bounded
        if rank in dead:
            continue
        if rank not in alive:
            over = lean_floor.get(rank)
            if over is None:
                over = lean_floor[rank] = probe.floor_over(rank, *lean)
            if over or probe.over(rank, *lean):
                # the leanest variant holds the least on the GPU: if even it overflows the
                # GPU, no variant of this shape fits (one memory evaluation instead of two)
                out(rank)
                continue
            alive.add(rank)
        miss = floor.get(i)
        if miss is None:
            miss = floor[i] = probe.floor_over(rank, mbs, rc, off)
        if miss or probe.over(rank, mbs, rc, off, sure=True):
            mem = None
        else:
            mem = probe.memory(rank, mbs, rc, off)
        if mem is not None and fits(mem, usable, host_ram, g):
            s = all_shapes[rank]
            if fit_verdict(mem, limit) == "tight":
                if rank not in tight:
                    lay = make_layout(
                        s, world=world, mbs=mbs, recompute=rc, offload_opt=off, offload_params=False
                    )
                    tight[rank] = Candidate(lay, mem, eff, s.label, rank)
                # if even the leanest variant of this shape is tight, none is sure
                if fit_verdict(probe.memory(rank, *lean), limit) != "fits":
                    out(rank)
                continue
            lay = make_layout(
                s, world=world, mbs=mbs, recompute=rc, offload_opt=off, offload_params=False
            )
            cand = Candidate(lay, mem, eff, s.label, rank)
            if len(found) < want:
                found.append(cand)
                if fam:
                    have.add(fam[rank])
                if len(found) >= want:
                    full_at = i
            elif fam and fam[rank] not in have:
                reps[fam[rank]] = cand
                have.add(fam[rank])
            out(rank)
            if len(found) >= want and (
                not fam or all(t in have or n == 0 for t, n in left.items())
            ):
                break
        elif (rc, off, mbs) != (lean_rc, lean_off, lean_mbs):
            # if the leanest variant of this shape does not fit, none will
            if rank not in lean_fits:
                lean_fits[rank] = probe.fits(rank, *lean)
            if not lean_fits[rank]:
                out(rank)
        else:
            out(rank)
    found += sorted(reps.values(), key=lambda c: (-c.efficiency, c.rank))
    if len(found) < want:
        sure_ranks = {c.rank for c in found}
        rest = sorted(
            (c for r, c in tight.items() if r not in sure_ranks),
            key=lambda c: (-c.efficiency, c.rank),
        )
        found += rest[: want - len(found)]
    return found


def any_fits(job: Job, v: Variants, nodes: int) -> bool:
    """Whether any shape fits at this node count (its leanest variant is enough to know)."""
    limit = v.usable * (1 - SAFETY_MARGIN)
    all_shapes, _effs, kinds = _shape_info(job, nodes, v.g)
    records = _records(job, kinds)
    probe = _Probe(job, nodes * v.g, limit, v.host_ram, v.g, all_shapes, kinds, records)
    lean = (min(v.mbs_options), v.recompute_options[-1], v.offloads()[-1])
    return any(probe.fits(rank, *lean) for rank in range(len(all_shapes)))


def node_candidates(max_nodes: int = 1024) -> list[int]:
    """Node counts tried when looking for the first count that fits."""
    base = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
    return [n for n in base if n <= max_nodes]
