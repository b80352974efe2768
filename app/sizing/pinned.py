"""A layout the customer pinned (``parallelism`` in the request): their degrees, at the node
counts worth comparing.

The degrees (TP, PP, EP, CP, the sharding and its shard group) are the customer's. The node
count is searched as for an automatic layout unless they pinned it too: more nodes add
data-parallel ranks around the pinned block (the form promises "we add nodes until the run
fits"), and ``recommend.choose_plan`` picks among the counts by the same rules as for any
layout (cheapest, the deadline counting delivery, the year). Before, a pinned layout stayed
at the fewest nodes that hold one block, so a deadline or a run of years never added a
node. A recompute the customer did not set is searched at each count (the cheapest that
fits, else the leanest, whose shortfall the card shows).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from app.sizing import compute, layout
from app.sizing.memory import FRAMEWORKS, SAFETY_MARGIN, Layout, Memory, fit_verdict, memory
from app.sizing.messages import Msg
from app.sizing.options import DEADLINE_SLACK
from app.sizing.profiles import profile
from app.sizing.search import HOURS_PER_YEAR, MAX_MONTHS_SEARCHED, SEARCH_BUDGET, Plan, SkuSearch
from app.sizing.splits import job_breaks
from app.sizing.stacks import NAMES


class Pinned(NamedTuple):
    tp: int
    pp: int
    ep: int
    cp: int
    sharding: str
    shard_group: int | None

    @property
    def block(self) -> int:
        """GPUs of one model replica's TP x PP x CP block."""
        return self.tp * self.pp * self.cp


def pinned_shape(s: SkuSearch) -> tuple[Pinned | None, Msg | None]:
    """The customer's degrees, or why the stack or the model cannot run them at any count."""
    r = s.r
    assert r.parallelism is not None
    p = r.parallelism
    tp, pp, ep, cp = (int(p.get(k) or 1) for k in ("tp", "pp", "ep", "cp"))
    if not profile(r.job.framework).runs(tp, pp, ep, cp):
        name = NAMES.get(r.job.framework, r.job.framework)
        return None, Msg("note.framework_layout", {"framework": name})
    why = job_breaks(r.job, tp, pp, ep, cp)
    if why:
        return None, Msg("note.layout_split", {"why": why[0]})
    sg = p.get("shard_group")
    return Pinned(tp, pp, ep, cp, str(p["sharding"]), int(sg) if sg else None), None


def _shard_group(s: SkuSearch, shape: Pinned, dp: int) -> tuple[int, int]:
    """(the shard group, the span it must divide) at ``dp`` data-parallel ranks: FSDP2 and
    Megatron's distributed optimizer shard over data-parallel x CP ranks."""
    span = dp * shape.cp if FRAMEWORKS[s.r.job.framework].shard_over_cp else dp
    sg = shape.shard_group or (1 if shape.sharding == "ddp" else span)
    return sg, span


def _why_not_at(s: SkuSearch, shape: Pinned, n: int) -> Msg | None:
    """Why ``shape`` cannot be built on ``n`` nodes (whole blocks, shard group, EP), or None."""
    w = n * s.g
    if w % shape.block:
        return Msg("note.layout_block", {"block": shape.block, "gpus": w})
    dp = w // shape.block
    sg, span = _shard_group(s, shape, dp)
    if span % sg:
        return Msg("note.shard_group_dp", {"shard_group": sg, "dp": span})
    if dp % shape.ep:
        return Msg("note.ep_dp", {"ep": shape.ep, "dp": dp})
    return None


def _buildable_from(s: SkuSearch, shape: Pinned, n: int) -> int | None:
    """The fewest count from ``n`` up to the most we price on which ``shape`` builds."""
    while n <= s.max_nodes:
        if _why_not_at(s, shape, n) is None:
            return n
        n += 1
    return None


def plan_at(s: SkuSearch, shape: Pinned, n: int) -> tuple[Plan | None, Msg | None]:
    """``shape`` on ``n`` nodes as a plan (``fits`` False when no recompute fits), or why it
    cannot be built there."""
    why = _why_not_at(s, shape, n)
    if why is not None:
        return None, why
    w = n * s.g
    sg, _span = _shard_group(s, shape, w // shape.block)
    label, fixed = Msg("layout.yours"), s.r.fixed
    kind = layout.Shape(shape.sharding, sg, shape.tp, shape.pp, shape.ep, shape.cp, label)
    limit = s.usable * (1 - SAFETY_MARGIN)
    tight: tuple[Layout, Memory] | None = None
    for rc in s.rc_opts:  # the cheapest recompute that surely fits, else one that may
        lay = layout.make_layout(
            kind,
            world=w,
            mbs=s.mbs,
            recompute=rc,
            offload_opt=bool(fixed.get("offload_optimizer", False)),
            offload_params=bool(fixed.get("offload_params", False)),
        )
        mem = memory(s.r.job, lay)
        fit = layout.fits(mem, s.usable, s.host, s.g)
        if fit and fit_verdict(mem, limit) == "fits":
            break
        if fit and tight is None:
            tight = (lay, mem)
    else:
        if tight is not None:
            (lay, mem), fit = tight, True
    cand = s.with_model(layout.Candidate(lay, mem, layout.efficiency(lay, s.g), label, 0))
    hours, months, cost = s.cost(n, cand.efficiency)
    return Plan(n, cand, hours, months, cost, fits=fit), None


def pinned_plans(s: SkuSearch) -> tuple[list[Plan], int, Msg | None]:
    """(plans at the counts worth comparing, fewest first; the count a refusal names; why
    nothing can be built). A plan that does not fit is returned alone (the card shows its
    shortfall); otherwise every plan fits."""
    shape, why = pinned_shape(s)
    if shape is None:
        return [], s.r.nodes or 1, why
    if s.r.nodes is not None:
        plan, why = plan_at(s, shape, s.r.nodes)
        return ([plan] if plan else []), s.r.nodes, why
    # the fewest count the layout builds on: whole blocks, the shard group dividing the
    # data-parallel (x CP) ranks, EP dividing the data-parallel size
    smallest = max(1, math.ceil(shape.block / s.g))
    n0 = _buildable_from(s, shape, smallest)
    if n0 is None:
        return [], smallest, _why_not_at(s, shape, smallest)
    first, why = plan_at(s, shape, n0)
    if first is None:
        return [], n0, why
    if not first.fits:
        fitting = _fewest_fitting(s, shape, n0)
        if fitting is None:
            return [first], n0, None  # the card shows the shortfall at the fewest count
        first = fitting
    out = {first.nodes: first}
    effs = [first.candidate.efficiency]
    queue = _aims(s, effs[0], first.months)
    budget = SEARCH_BUDGET
    while queue:
        x = min(queue)
        queue.discard(x)
        n_at = _buildable_from(s, shape, min(x, s.max_nodes)) if x > first.nodes else None
        if n_at is None or n_at in out:
            continue
        if budget <= 0:
            s.notes.append(Msg("note.search_budget"))
            break
        budget -= 1
        got, _ = plan_at(s, shape, n_at)
        if got is None or not got.fits:
            continue
        out[n_at] = got
        e = got.candidate.efficiency
        if all(abs(e - y) > 0.02 * y for y in effs):  # another speed here: aim from it too
            effs.append(e)
            queue |= {c for c in _aims(s, e, got.months) if c > n_at}
    if s.r.max_days:
        _meet_deadline(s, shape, out, s.r.max_days * 24 * DEADLINE_SLACK)
    return sorted(out.values(), key=lambda p: p.nodes), n0, None


def _fewest_fitting(s: SkuSearch, shape: Pinned, n0: int) -> Plan | None:
    """The fewest count from ``n0`` on where the layout fits (memory falls as more ranks
    shard the states): doubling to a count that fits, then halving the gap back down (a
    doubling alone offered 8 nodes where 6 fit)."""
    lo, hi, best = n0, None, None
    n = n0
    while n < s.max_nodes:
        nxt = _buildable_from(s, shape, min(s.max_nodes, 2 * n))
        if nxt is None or nxt <= n:
            break
        n = nxt
        got, _ = plan_at(s, shape, n)
        if got is not None and got.fits:
            hi, best = n, got
            break
        lo = n
    if hi is None:
        return None
    while True:
        mid = _buildable_from(s, shape, (lo + hi) // 2 + 1)
        if mid is None or mid >= hi:
            return best
        got, _ = plan_at(s, shape, mid)
        if got is not None and got.fits:
            hi, best = mid, got
        else:
            lo = mid


DEADLINE_STEPS = 8  # counts priced one by one above the aim when it misses the deadline


def _meet_deadline(s: SkuSearch, shape: Pinned, out: dict[int, Plan], deadline_h: float) -> None:
    """Price the counts just above the largest one that misses ``deadline_h`` (below the
    fewest that meets it): the aim is worked out at another count's speed, so it can land
    one count short (4 nodes ending on day 30.03 for a 30-day deadline that 5 meet)."""

    def meets(p: Plan) -> bool:
        f = s.finish_hours(p)
        return f is not None and f <= deadline_h

    met = [p.nodes for p in out.values() if meets(p)]
    cap = min(met) if met else s.max_nodes + 1
    below = [p.nodes for p in out.values() if not meets(p) and p.nodes < cap]
    n: int | None = max(below) if below else None
    for _ in range(DEADLINE_STEPS):
        n = _buildable_from(s, shape, n + 1) if n is not None else None
        if n is None or n >= cap:
            return
        got, _ = plan_at(s, shape, n)
        if got is not None and got.fits:
            out[n] = got
            if meets(got):
                return


def _aims(s: SkuSearch, e: float, months: int) -> set[int]:
    """The counts worth pricing at efficiency ``e`` (as ``SkuSearch.plans`` aims them): the
    fewest nodes for each month count up to ``months``, the self-serve limit, a year, the
    deadline (per delivery step)."""
    top = min(months, MAX_MONTHS_SEARCHED)
    out = {s.nodes_within(m * compute.HOURS_PER_MONTH, e) for m in range(1, top + 1)}
    out |= {min(s.self_serve_cap, s.max_nodes), s.nodes_within(HOURS_PER_YEAR, e)}
    if s.r.max_days:
        out.add(s.nodes_within(s.r.max_days * 24, e))
        out |= s.deadline_counts(s.r.max_days * 24, e)
        out |= s.delivery_step_tops()  # where the earliest finish is, when none meets it
    return out
