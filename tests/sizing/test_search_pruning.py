"""The search's pruning (app/sizing/layout.py) never changes which layouts it returns.

``best_layouts`` skips ``memory()`` evaluations whose outcome already follows from others:
a layout whose memory *floor* (the same layout with an unreachably large shard group)
overflows the GPU cannot fit at any group, and an evaluation at group ``d'`` bounds every
group ``d`` of the same shape kind and variant (memory never grows with the group). These
tests lock in both halves: the monotonicity the pruning relies on, stated on the memory
model itself (so a model change that breaks it fails here, not silently in the search),
and the pruned search against a small exhaustive reference — the plain walk that
evaluates every layout it considers — over random jobs, SKUs and sequences of node counts
sharing one memo (the order the engine visits them in).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.sizing import PRESETS, layout
from app.sizing import shapes as shapes_mod
from app.sizing.layout import (
    OFFLOAD_OPT_EFF,
    RECOMPUTE_EFF,
    REP_SCAN,
    Candidate,
    fits,
    make_layout,
    memory_floor,
    shape_efficiency,
    shapes,
)
from app.sizing.memo import Memo
from app.sizing.memory import SAFETY_MARGIN, Job, Layout, Memory, fit_verdict, memory, memory_range
from app.sizing.request import parse

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PRESET_IDS = sorted(PRESETS)

requests = st.fixed_dictionaries(
    {
        "model": st.fixed_dictionaries({"preset": st.sampled_from(PRESET_IDS)}),
        "seq_len": st.sampled_from([2048, 4096, 32768]),
        "tokens": st.just(1e11),
        "method": st.sampled_from(["full", "full", "lora", "qlora"]),
        "framework": st.sampled_from(["megatron", "fsdp2", "deepspeed", "hf"]),
        "optimizer": st.sampled_from(["adamw", "adamw8bit"]),
        "optimizer_in_backward": st.booleans(),
        "global_batch_size": st.sampled_from([None, None, 64, 1024]),
    }
)


def _job(req: dict[str, Any]) -> Job:
    try:
        r = parse(req)
    except Exception:  # noqa: BLE001 - a refused request has no job to test
        assume(False)
        raise
    return replace(r.job, cache=Memo())


def reference_best_layouts(
    job: Job,
    *,
    nodes: int,
    g: int,
    usable: int,
    host_ram: int | None,
    want: int,
    family: layout.Family | None = None,
    scan: int = REP_SCAN,
) -> list[Candidate]:
    """The walk with every memory evaluated (the search before any pruning); ``family``:
    then, for up to ``scan`` more variants, the first sure layout of every family that the
    ``want`` best do not already stand for."""
    mbs_options, recompute_options = [1], ["none", "selective", "full"]
    offload_options = [False, True] if host_ram is not None else [False]
    world = nodes * g
    all_shapes = shapes(job, nodes, g)
    combos = []
    for rank, s in enumerate(all_shapes):
        se = shape_efficiency(s, g)
        for mbs in mbs_options:
            for rc in recompute_options:
                for off in offload_options:
                    eff = se * RECOMPUTE_EFF[rc] * (OFFLOAD_OPT_EFF if off else 1.0)
                    combos.append((eff, rank, mbs, rc, off))
    combos.sort(key=lambda c: (-c[0], c[1], -c[2]))
    limit = usable * (1 - SAFETY_MARGIN)
    found: list[Candidate] = []
    tight: dict[int, Candidate] = {}
    dead: set[int] = set()
    lean_v = (recompute_options[-1], offload_options[-1])

    def lean(rank: int) -> Memory:
        s = all_shapes[rank]
        lay = make_layout(
            s, world=world, mbs=1, recompute=lean_v[0], offload_opt=lean_v[1], offload_params=False
        )
        return memory(job, lay)

    reps: dict[Any, Candidate] = {}
    full_at: int | None = None
    for i, (eff, rank, mbs, rc, off) in enumerate(combos):
        if full_at is not None and (family is None or i - full_at > scan):
            break
        if rank in dead:
            continue
        if lean(rank).total > limit:
            dead.add(rank)
            continue
        s = all_shapes[rank]
        lay = make_layout(
            s, world=world, mbs=mbs, recompute=rc, offload_opt=off, offload_params=False
        )
        mem = memory(job, lay)
        if fits(mem, usable, host_ram, g):
            cand = Candidate(lay, mem, eff, s.label, rank)
            if fit_verdict(mem, limit) == "tight":
                tight.setdefault(rank, cand)
                if fit_verdict(lean(rank), limit) != "fits":
                    dead.add(rank)
                continue
            if len(found) < want:
                found.append(cand)
                if len(found) >= want:
                    full_at = i
            elif (
                family is not None
                and family(s) not in reps
                and family(s) not in {family(c.layout) for c in found}
            ):
                reps[family(s)] = cand
            dead.add(rank)
        elif not fits(lean(rank), usable, host_ram, g):
            # if the leanest variant does not fit, none will (for the leanest itself: it
            # just did not)
            dead.add(rank)
    found += sorted(reps.values(), key=lambda c: (-c.efficiency, c.rank))
    if len(found) < want:
        sure = {c.rank for c in found}
        rest = sorted(
            (c for r, c in tight.items() if r not in sure), key=lambda c: (-c.efficiency, c.rank)
        )
        found += rest[: want - len(found)]
    return found


GIB = 1024**3


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    req=requests,
    g=st.sampled_from([4, 8]),
    # any GPU size and host RAM, not only today's catalog: fit thresholds fall anywhere
    usable_gib=st.floats(16, 300),
    host_tb=st.sampled_from([None, 0.5, 2.0]),
    counts=st.lists(st.integers(1, 160), min_size=1, max_size=10),
    want=st.sampled_from([1, 3]),
)
def test_the_pruned_walk_returns_what_the_exhaustive_walk_returns(
    req: dict[str, Any],
    g: int,
    usable_gib: float,
    host_tb: float | None,
    counts: list[int],
    want: int,
) -> None:
    job = _job(req)
    usable = int(usable_gib * GIB)
    host = None if host_tb is None else int(host_tb * 1e12)
    pruned_job = replace(job, cache=Memo())  # one memo across the counts, as in the engine
    for n in counts:
        variants = layout.Variants(
            g, usable, host, (1,), ("none", "selective", "full"), (False, True)
        )
        got = layout.best_layouts(pruned_job, variants, n, want=want)
        want_ = reference_best_layouts(
            replace(job, cache=Memo()), nodes=n, g=g, usable=usable, host_ram=host, want=want
        )
        assert got == want_, (n, [c.layout for c in got], [c.layout for c in want_])
        anyfit = layout.any_fits(pruned_job, variants, n)
        lean = [
            make_layout(
                s,
                world=n * g,
                mbs=1,
                recompute="full",
                offload_opt=bool(host),
                offload_params=False,
            )
            for s in shapes(job, n, g)
        ]
        assert anyfit == any(fits(memory(job, x), usable, host, g) for x in lean)


@FAST
@given(
    req=requests,
    nodes=st.integers(1, 256),
    g=st.sampled_from([4, 8]),
    rc=st.sampled_from(["none", "selective", "full"]),
    off=st.booleans(),
    data=st.data(),
)
def test_memory_never_grows_with_the_shard_group_and_the_floor_bounds_it(
    req: dict[str, Any], nodes: int, g: int, rc: str, off: bool, data: st.DataObject
) -> None:
    """What the pruning relies on: for groups ≥ 2, a larger shard group holds no more on
    the GPU nor on the host, and the floor (an unreachable group) holds no more than any."""
    job = _job(req)
    s = data.draw(st.sampled_from(shapes(job, nodes, g)))
    if s.sharding == "ddp":
        return
    base = make_layout(
        s, world=nodes * g, mbs=1, recompute=rc, offload_opt=off, offload_params=False
    )
    groups = sorted(data.draw(st.lists(st.integers(2, 4096), min_size=2, max_size=4)))
    mems = [memory(job, replace(base, shard_group=d)) for d in groups]
    for small, big in zip(mems, mems[1:], strict=False):
        assert big.total <= small.total
        assert big.cpu_offload_per_gpu <= small.cpu_offload_per_gpu
    floor = memory_floor(job, replace(base, shard_group=groups[0]))
    assert floor is not None
    assert floor.total <= mems[-1].total


def reference_any_fits(job: Job, v: layout.Variants, nodes: int) -> bool:
    g, usable, host_ram = v.g, v.usable, v.host_ram
    mbs_options, recompute_options = v.mbs_options, v.recompute_options
    offload_options = v.offload_options
    if host_ram is None:
        offload_options = tuple(o for o in offload_options if not o) or offload_options
    return any(
        fits(
            memory(
                job,
                make_layout(
                    s,
                    world=nodes * g,
                    mbs=min(mbs_options),
                    recompute=recompute_options[-1],
                    offload_opt=offload_options[-1],
                    offload_params=False,
                ),
            ),
            usable,
            host_ram,
            g,
        )
        for s in shapes(job, nodes, g)
    )


def _reference_best(
    job: Job,
    v: layout.Variants,
    nodes: int,
    *,
    want: int = 2,
    family: layout.Family | None = None,
    scan: int = REP_SCAN,
) -> list[Candidate]:
    assert v.mbs_options == (1,) and v.offload_options == (False, True)
    assert v.recompute_options == ("none", "selective", "full")
    return reference_best_layouts(
        job,
        nodes=nodes,
        g=v.g,
        usable=v.usable,
        host_ram=v.host_ram,
        want=want,
        family=family,
        scan=scan,
    )


def _cold_answer(req: dict[str, Any]) -> Any:
    from app.sizing import engine, size
    from app.sizing import memory as memory_mod

    engine.cache_clear()
    with memory_mod._SHARED_LOCK:
        memory_mod._SHARED.clear()
    try:
        return size(req)
    except Exception as e:  # noqa: BLE001 - a refusal is an answer
        return repr(e)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    preset=st.sampled_from(PRESET_IDS),
    seq=st.sampled_from([4096, 32768]),
    tokens=st.sampled_from([1e10, 1e11, 1e12, 1.5e13]),
    max_days=st.sampled_from([None, None, 7, 60]),
)
def test_the_engine_answers_as_with_the_exhaustive_walk(
    preset: str, seq: int, tokens: float, max_days: int | None
) -> None:
    """Whole answers (recommendation, every SKU's option, notes) with the pruned walk equal
    those with the walk that evaluates every layout."""
    req: dict[str, Any] = {"model": {"preset": preset}, "seq_len": seq, "tokens": tokens}
    if max_days:
        req["max_days"] = max_days
    pruned = _cold_answer(req)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layout, "best_layouts", _reference_best)
        mp.setattr(layout, "any_fits", reference_any_fits)
        exhaustive = _cold_answer(req)
    assert pruned == exhaustive


def test_make_layout_builds_what_the_dataclass_builds() -> None:
    """make_layout fills the instance dictionary in one step (app/sizing/layout.py): the
    same fields, equality, hash, repr and replace() as Layout(...) itself, and every field
    set (a new Layout field must be added there too)."""
    s = layout.Shape("zero3", 16, 2, 4, 1, 2, shapes_mod._label("layout.cp", {"cp": 2}))
    got = make_layout(
        s, world=128, mbs=2, recompute="selective", offload_opt=True, offload_params=False
    )
    want = Layout(
        sharding="zero3",
        shard_group=16,
        tp=2,
        pp=4,
        ep=1,
        cp=2,
        micro_batch_size=2,
        recompute="selective",
        offload_optimizer=True,
        offload_params=False,
        world=128,
    )
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert vars(got) == vars(want) and list(vars(got)) == [f.name for f in fields(Layout)]
    assert replace(got, tp=8, pp_schedule="gpipe") == replace(want, tp=8, pp_schedule="gpipe")
    with pytest.raises(AttributeError):
        got.tp = 4  # type: ignore[misc]  # still frozen


def test_setup_for_builds_what_the_dataclass_builds() -> None:
    """compute.setup_for fills the throughput model's Setup in one step: the same fields,
    equality, hash and repr as Setup(...) itself, every field set (a new Setup field must be
    added there too)."""
    from app.sizing import compute
    from app.sizing.throughput import Setup

    job = replace(
        _job({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}), global_batch_size=512
    )
    s = layout.Shape("zero3", 16, 2, 4, 1, 2, shapes_mod._label("layout.cp", {"cp": 2}))
    lay = make_layout(
        s, world=128, mbs=2, recompute="selective", offload_opt=True, offload_params=False
    )
    got = compute.setup_for(job, lay)
    want = Setup(
        world=128,
        tp=2,
        pp=4,
        ep=1,
        cp=2,
        sharding="zero3",
        shard_group=16,
        micro_batch_size=2,
        recompute="selective",
        offload_optimizer=True,
        offload_params=False,
        num_microbatches=max(1, 512 // (8 * 2)),
        pp_schedule=job.pp_schedule,
        virtual_stages=job.virtual_stages,
        activation_offload_bytes=0.0,
    )
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert vars(got) == vars(want) and list(vars(got)) == [f.name for f in fields(Setup)]
    with pytest.raises(AttributeError):
        got.tp = 4  # type: ignore[misc]  # still frozen


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(req=requests, nodes=st.sampled_from([1, 2, 3, 8, 24]))
def test_a_memorys_cached_total_and_range_are_its_own(req: dict[str, Any], nodes: int) -> None:
    """Memory.total and Memory.range_high are computed once per figure: they equal the sum
    of the parts and memory_range's high end, and play no part in equality."""
    job = _job(req)
    for s in shapes(job, nodes, 8)[:6]:
        lay = make_layout(
            s, world=nodes * 8, mbs=1, recompute="full", offload_opt=False, offload_params=False
        )
        m = memory(job, lay)
        parts = (
            m.weights
            + m.gradients
            + m.master_weights
            + m.optimizer_states
            + m.activations
            + m.overhead
        )
        assert m.total == parts
        # new_memory (one step) builds what the dataclass builds, every field set
        fresh = Memory(**{f.name: getattr(m, f.name) for f in fields(Memory)})
        assert m == fresh and hash(m) == hash(fresh) and repr(m) == repr(fresh)
        assert [k for k in vars(m) if k in {f.name for f in fields(Memory)}] == [
            f.name for f in fields(Memory)
        ]
        assert memory_range(m)[1] == m.range_high == memory_range(replace(m))[1]
        assert replace(m) == m and hash(replace(m)) == hash(m)
