"""Node-count search on one SKU: which node counts fit, and what each costs and takes.

:class:`SkuSearch` prices a node count as a :class:`Plan` (best fitting layout, hours, whole
rented months, cost); :meth:`SkuSearch.plans` returns the node counts worth comparing (the
first count that fits, the fewest nodes finishing within each month count, the self-serve
limit, the deadline). Which plan to show is decided by ``recommend.choose_plan``.
"""

from __future__ import annotations

import math
from datetime import date
from typing import NamedTuple

from app.catalog.specs import SELF_SERVE_MAX_NODES, NodeSpec
from app.sizing import compute, layout
from app.sizing.memory import SAFETY_MARGIN, Layout, fit_verdict, memory
from app.sizing.messages import Msg
from app.sizing.request import MAX_NODES, Request

MAX_MONTHS_SEARCHED = 36
SEARCH_BUDGET = 40  # node counts priced per SKU beyond the first that fits
STEPS = 16  # counts priced per shape by SkuSearch.fewest_within's aims
WALK_SCAN = 8  # variants scanned for the families of every count (layout.best_layouts)
SCAN = 12  # counts priced one by one below the best that SkuSearch.fewest_within's aims found
HOURS_PER_YEAR = 12 * compute.HOURS_PER_MONTH

# Promised delivery of one SKU: (up to this many nodes, delivered in this many days from
# today), ascending; a count beyond the last step has no promised date.
Delivery = tuple[tuple[int, float], ...]


def unit_price_cents(spec: NodeSpec, prices: dict[str, int] | None) -> int:
    """Price of one unit (an 8-GPU node, or a whole rack for per-GPU-priced racks)."""
    p = spec.list_price_cents_month
    if prices and spec.id in prices:
        p = int(prices[spec.id])
    return p * spec.gpus_per_node if spec.price_per_gpu else p


def runs_precision(spec: NodeSpec, precision: str) -> bool:
    """FP4 training needs FP4 tensor cores (an FP4 dense peak in the catalog)."""
    return precision != "fp4" or bool(spec.fp4_dense_tflops)


class Plan(NamedTuple):
    """One SKU at one node count with its best fitting layout (a named tuple: a search
    prices up to a hundred counts per SKU)."""

    nodes: int
    candidate: layout.Candidate
    hours: float
    months: int
    cost_cents: int
    fits: bool = True


class SkuSearch:
    """Everything about sizing ``r`` on ``spec`` that depends on the node count."""

    def __init__(
        self,
        r: Request,
        spec: NodeSpec,
        flops: float,
        price_cents: int,
        *,
        delivery: Delivery | None = None,
        today: date | None = None,
    ) -> None:
        self.r = r
        self.today = today  # the customer's today (finish dates), None: days only
        # promised delivery per node count (the caller's stock, read outside the engine);
        # None: no catalog, delivery is not counted
        self.delivery = delivery
        self.spec = spec
        self.g = spec.gpus_per_node
        self.usable = spec.usable_gpu_memory_bytes
        self.host = spec.node_ram_bytes
        # A request's mfu overrides the time model; otherwise each layout's efficiency *is*
        # the throughput model's predicted MFU (base 1.0): hours = FLOPs / (GPUs·peak·MFU).
        self.modelled = r.mfu is None
        self.mfu = r.mfu if r.mfu is not None else 1.0
        self.supported = runs_precision(spec, r.job.precision)
        self.peak = compute.peak_tflops(spec, r.job.precision if self.supported else "bf16")
        self._predicted: dict[Layout, tuple[float, float]] = {}
        self.price = price_cents
        self.min_months = int(spec.raw.get("min_term_months") or 1)
        self.one_node_hours = compute.training_seconds(flops, self.g, self.peak, self.mfu) / 3600
        self.max_nodes = MAX_NODES
        self.self_serve_cap = SELF_SERVE_MAX_NODES if spec.self_serve else MAX_NODES
        self.notes: list[Msg] = []
        self.mbs = int(r.fixed["micro_batch_size"])
        self.rc_opts = (
            (str(r.fixed["recompute"]),)
            if "recompute" in r.fixed
            else ("none", "selective", "full")
        )
        self.off_opts = (
            (bool(r.fixed["offload_optimizer"]),)
            if "offload_optimizer" in r.fixed
            else (False, True)
        )
        self.variants = layout.Variants(
            self.g, self.usable, self.host, (self.mbs,), self.rc_opts, self.off_opts
        )
        self._best: dict[tuple[int, int, bool], list[layout.Candidate]] = {}
        # plans(): whether only the self-serve counts were priced (the cluster plan is then
        # asked for by choose_plan through fewest_within), and what fewest_within priced
        self.bounded = False
        self.extra_plans: dict[int, Plan] = {}
        self._n0 = 1
        self._pool: dict[int, Plan] = {}

    # --- money and time at a node count ---------------------------------------------------

    def cost(self, n: int, eff: float) -> tuple[float, int, int]:
        """(hours, whole months per node, cost in cents) for ``n`` nodes at ``eff``."""
        hours = self.one_node_hours / n / eff
        months = compute.rental_months(hours, min_months=self.min_months)
        return hours, months, months * n * self.price

    def nodes_within(self, hours: float, eff: float) -> int:
        """Fewest nodes that finish within ``hours`` at efficiency ``eff``."""
        return max(1, math.ceil(self.one_node_hours / (hours * eff) - 1e-9))

    def lead_days(self, n: int) -> float | None:
        """Days from today until ``n`` nodes are delivered: 0 without a delivery table,
        None when the table promises no date for ``n`` nodes (a sales conversation)."""
        if self.delivery is None:
            return 0.0
        for up_to, days in self.delivery:
            if n <= up_to:
                return float(days)
        return None

    def finish_hours(self, p: Plan) -> float | None:
        """Hours from today until ``p``'s run ends: delivery, then training."""
        lead = self.lead_days(p.nodes)
        return None if lead is None else lead * 24 + p.hours

    def delivery_step_tops(self) -> set[int]:
        """The most nodes each delivery step promises (the fastest count delivered then)."""
        return {min(up_to, self.max_nodes) for up_to, _days in self.delivery or ()}

    def deadline_counts(self, deadline_hours: float, eff: float) -> set[int]:
        """The fewest nodes that finish by the deadline at ``eff`` for each delivery step
        (a count delivered later has less time to train)."""
        if self.delivery is None:
            return {min(self.max_nodes, self.nodes_within(deadline_hours, eff))}
        out: set[int] = set()
        lo = 1
        for up_to, days in self.delivery:
            left = deadline_hours - days * 24
            if left > 0:
                n = max(lo, self.nodes_within(left, eff))
                if n <= up_to:
                    out.add(min(self.max_nodes, n))
            lo = up_to + 1
        return out

    # --- layouts ----------------------------------------------------------------------------

    def with_model(self, c: layout.Candidate) -> layout.Candidate:
        """``c`` with its efficiency from the throughput model (unless the mfu is pinned)."""
        if not self.modelled:
            return c
        got = self._predicted.get(c.layout)  # (one hash of the layout, not two)
        if got is None:
            got = self._predicted[c.layout] = compute.predicted_mfu(
                self.r.job, c.layout, self.spec, attention_counted=self.r.attention_flops
            )
        return layout.Candidate(c.layout, c.memory, got[0], c.label, c.rank)

    def tokens_per_s_per_gpu(self, lay: Layout) -> float | None:
        got = self._predicted.get(lay)
        return None if got is None else got[1]

    def best(self, n: int, want: int = 1, *, families: bool = False) -> list[layout.Candidate]:
        """The ``want`` best fitting layouts at ``n`` nodes. ``families``: for a MoE the
        throughput model also ranks one layout of every (TP, EP) pair, ZeRO-3 or not (see
        ``layout.best_layouts``), as it always does for a pinned node count."""
        key = (n, want, families)
        if key not in self._best:
            # the heuristic order proposes the first few layouts that fit; the throughput
            # model picks among them (TP or not, EP or not: the heuristic cannot tell)
            extra = 2 if self.modelled else 0
            # the layouts depend on the job and the node, not on the tokens: kept in the
            # job's memo, which requests for the same job share (memory.with_shared_memo)
            memo = self.r.job.cache
            # the throughput model also ranks one layout of each family the static order
            # cannot rank: ZeRO-3 or not, EP or not at every count; for a MoE every (TP, EP)
            # pair too, at one count only (a pinned count, or the count a plan was chosen at:
            # turned on for every count it cost the grid's p95 a half more,
            # docs/benchmarks-ab.md)
            family: layout.Family | None = None
            if self.modelled:
                moe = self.r.job.arch.moe is not None
                wide = moe and (families or self.r.nodes is not None)
                family = layout.tp_ep_zero3 if wide else layout.zero3_and_ep
            scan = layout.REP_SCAN if family is layout.tp_ep_zero3 else WALK_SCAN
            mk = ("best", n, self.variants, want + extra, family, scan)
            found = memo.get(mk)
            if found is None:
                found = layout.best_layouts(
                    self.r.job, self.variants, n, want=want + extra, family=family, scan=scan
                )
                memo.put(mk, found)
            found = [self.with_model(c) for c in found]
            if self.modelled:  # a surely-fitting layout still beats a tight one
                found.sort(key=lambda c: (*self._order(c), c.rank))
            self._best[key] = found[:want]
        return self._best[key]

    def _order(self, c: layout.Candidate) -> tuple[bool, float]:
        """How the throughput model ranks layouts at one count: a surely fitting one first,
        then the faster (``best`` breaks ties by the static order)."""
        limit = self.usable * (1 - SAFETY_MARGIN)
        return fit_verdict(c.memory, limit) != "fits", -round(c.efficiency, 6)

    def any_fit(self, n: int) -> bool:
        memo = self.r.job.cache
        mk = ("any", n, self.variants)
        got = memo.get(mk)
        if got is None:
            got = layout.any_fits(self.r.job, self.variants, n)
            memo.put(mk, got)
        return bool(got)

    def plan(self, n: int) -> Plan | None:
        found = self.best(n)
        if not found:
            return None
        hours, months, cost = self.cost(n, found[0].efficiency)
        return Plan(n, found[0], hours, months, cost)

    def refined(self, p: Plan) -> Plan:
        """A MoE's plan ``p`` with the best layout at its node count once one layout of every
        (TP, EP) pair, ZeRO-3 or not, has been ranked by the throughput model (the plans
        were priced with the static order's first few and one layout per ZeRO-3-or-not and
        EP-or-not family: TP splits a MoE's small expert GEMMs, which that order cannot
        rank)."""
        if not self.modelled or self.r.job.arch.moe is None:
            return p  # a dense model's families were ranked at every count
        found = self.best(p.nodes, want=2, families=True)  # the runner-up's list too
        if not found or self._order(found[0]) >= self._order(p.candidate):
            return p  # no better layout (a tie keeps the plan's own)
        hours, months, cost = self.cost(p.nodes, found[0].efficiency)
        return Plan(p.nodes, found[0], hours, months, cost)

    def runner_up(self, p: Plan) -> layout.Candidate | None:
        """The next best layout at ``p``'s count (never ``p``'s own: on a tie ``refined``
        keeps the plan's layout, which the list may rank second)."""
        ranked = self.best(p.nodes, want=2, families=True)
        return next((c for c in ranked if c.layout != p.candidate.layout), None)

    # --- the search -------------------------------------------------------------------------

    def lower_bound(self) -> int:
        """Fewest nodes worth trying: weights + gradients (4 B/param) stay on GPU."""
        j = self.r.job
        n = math.ceil(4.0 * j.counts.total / (self.g * self.usable)) if j.method == "full" else 1
        return max(1, min(n, self.max_nodes))

    def first_fit(self) -> int | None:
        """The smallest node count at which some layout fits (memory only falls with nodes)."""
        lb = self.lower_bound()
        ns = [n for n in layout.node_candidates(self.max_nodes) if n >= lb]
        ns = ns or [self.max_nodes]
        if self.best(ns[0]):
            return ns[0]
        if not self.any_fit(ns[-1]):
            return None
        lo, hi = 0, len(ns) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.any_fit(ns[mid]):
                hi = mid
            else:
                lo = mid + 1
        a, b = (ns[lo - 1] + 1 if lo > 0 else ns[0]), ns[lo]
        while a < b:
            mid = (a + b) // 2
            if self.any_fit(mid):
                b = mid
            else:
                a = mid + 1
        return a

    def plans(self) -> list[Plan]:
        """Plans at the node counts a customer might choose, fewest nodes first.

        When a count up to the self-serve limit fits with a layout whose upper memory
        estimate fits, only self-serve counts are priced here (the first that fits, the
        fewest nodes per month count at the efficiencies met, the limit) and ``bounded`` is
        set: a count beyond the limit matters only as the cluster plan of the year or the
        deadline rule, which ``recommend.choose_plan`` asks :meth:`fewest_within` for, and
        the year rule's premium check asks :meth:`self_serve_plans` for every self-serve
        count. Otherwise every count a customer might choose is priced, up to the most we
        price (``MAX_NODES``), within ``SEARCH_BUDGET``.
        """
        self.bounded = False
        self.extra_plans = {}
        if self.r.nodes is not None:
            p = self.plan(self.r.nodes)
            return [p] if p else []
        n0 = self.first_fit()
        if n0 is None:
            return []
        first = self.plan(n0)
        if first is None:
            return []
        self._n0 = n0
        cap = min(self.self_serve_cap, self.max_nodes)
        if n0 <= cap < self.max_nodes:
            pool = self._walk(n0, first, cap)
            limit = self.usable * (1 - SAFETY_MARGIN)
            if any(fit_verdict(p.candidate.memory, limit) == "fits" for p in pool):
                self.bounded = True
                self._pool = {p.nodes: p for p in pool}
                return pool
        return self._walk(n0, first, self.max_nodes)

    def _walk(self, n0: int, first: Plan, upto: int) -> list[Plan]:
        """Price the counts worth comparing from ``n0`` up to ``upto`` nodes."""
        out = {n0: first}
        wanted: list[int] = []
        effs = {first.candidate.efficiency}
        for e in list(effs):
            for m in range(1, min(first.months, MAX_MONTHS_SEARCHED) + 1):
                wanted.append(self.nodes_within(m * compute.HOURS_PER_MONTH, e))
        wanted.append(min(self.self_serve_cap, self.max_nodes))
        e0 = first.candidate.efficiency
        wanted.append(min(self.max_nodes, self.nodes_within(HOURS_PER_YEAR, e0)))
        if self.r.max_days:
            # the deadline's count, or the most we price when even that cannot meet it
            wanted.append(min(self.max_nodes, self.nodes_within(self.r.max_days * 24, e0)))
            wanted.extend(self.deadline_counts(self.r.max_days * 24, e0))
            # the fastest count of each delivery step: when nothing meets the deadline, the
            # earliest finish is among them ("earliest: 1 node, day 11" while 2 took 8)
            wanted.extend(self.delivery_step_tops())
        budget = SEARCH_BUDGET
        queue = sorted({n for n in wanted if n0 < n <= upto})
        while queue:
            n = queue.pop(0)
            if n in out:
                continue
            if budget <= 0:
                self.notes.append(Msg("note.search_budget"))
                break
            budget -= 1
            p = self.plan(n)
            if p is None:
                continue
            out[n] = p
            e = p.candidate.efficiency
            if all(abs(e - x) > 0.02 * x for x in effs):  # modelled MFUs differ a little
                # a different layout at this size: its own fewest-nodes-per-month counts
                effs.add(e)
                # every month count up to this plan's, as for the first plan: a count the
                # first efficiency did not point at may be the fewest nodes for its month
                extra = {
                    self.nodes_within(m * compute.HOURS_PER_MONTH, e)
                    for m in range(1, min(p.months, MAX_MONTHS_SEARCHED) + 1)
                }
                extra.add(min(self.max_nodes, self.nodes_within(HOURS_PER_YEAR, e)))
                if self.r.max_days:
                    extra.add(min(self.max_nodes, self.nodes_within(self.r.max_days * 24, e)))
                    extra |= self.deadline_counts(self.r.max_days * 24, e)
                # each aimed at the fewest count that offers this plan's shape: a shape needs
                # whole data-parallel groups (PP 2 x EP 8 runs on 8 nodes, not on 7), and an
                # efficiency met far above the first fit may already make a month just
                # above it
                lay = p.candidate.layout
                kind = (lay.tp, lay.pp, lay.ep, lay.cp)
                extra = {
                    (self._with_shape(max(x, n0 + 1), kind) or x) if x < p.nodes else x
                    for x in extra
                }
                queue = sorted(set(queue) | {x for x in extra if n0 < x <= upto})
        return sorted(out.values(), key=lambda p: p.nodes)

    def self_serve_plans(self) -> list[Plan]:
        """Every self-serve count from the first that fits to the limit, priced (bounded
        searches only: at most ``SELF_SERVE_MAX_NODES`` counts)."""
        cap = min(self.self_serve_cap, self.max_nodes)
        for n in range(self._n0, cap + 1):
            if n not in self._pool:
                p = self.plan(n)
                if p is not None:
                    self._pool[n] = p
        return [self._pool[n] for n in sorted(self._pool)]

    def _with_shape(self, n: int, kind: tuple[int, int, int, int]) -> int | None:
        """The fewest count from ``n`` up to ``MAX_NODES`` that offers a shape with these
        (tp, pp, ep, cp), or None."""
        while n <= self.max_nodes:
            if any((x.tp, x.pp, x.ep, x.cp) == kind for x in layout.shapes(self.r.job, n, self.g)):
                return n
            n += 1
        return None

    def fewest_within(self, hours: float) -> Plan | None:
        """The cluster plan of a bounded search: the fewest nodes beyond the self-serve
        limit that finish within ``hours`` with a layout whose upper memory estimate fits;
        None when none is found.

        1. Aims, one per parallel shape (TP, PP, EP, CP) of the self-serve plans whose upper
           estimate fits, at that shape's efficiency on the largest such count: the fewest
           count that would finish in time at that efficiency and offers the shape; a count
           that misses is aimed again at the efficiency found there (never lower; one count
           up when that aims no higher), at most ``STEPS`` counts per shape, and none once
           another shape made it with no more nodes.
        2. Below the fewest count that makes it, the ``SCAN`` counts under it, lowest first,
           but none below what the most efficient plan priced so far would need (a smaller
           count would have to be more efficient than any met); a count that makes it is
           looked under the same way.

        The efficiency of a count moves by several per cent from one count to the next
        (which shapes it offers decides which layout wins), so step 2 finds counts the aims
        step over. A function of the job and the SKU alone (no search order, no budget);
        every count priced on the way is kept in ``extra_plans`` (the deadline rule's
        fastest plan is taken among them and the self-serve ones).
        """
        lo = min(self.self_serve_cap, self.max_nodes) + 1
        limit = self.usable * (1 - SAFETY_MARGIN)

        priced: dict[int, Plan] = {}  # this call's counts: the answer depends on nothing else

        def price(n: int) -> Plan | None:
            p = priced.get(n) or self.plan(n)
            if p is not None:
                priced[n] = self.extra_plans[n] = p
            return p

        def ok_fit(p: Plan) -> bool:
            return fit_verdict(p.candidate.memory, limit) == "fits"

        def ok(p: Plan | None) -> bool:
            return p is not None and p.hours <= hours and ok_fit(p)

        def aim(e: float, kind: tuple[int, int, int, int]) -> int | None:
            n = max(lo, min(self.max_nodes, self.nodes_within(hours, e)))
            return self._with_shape(n, kind)

        seen: dict[tuple[int, int, int, int], float] = {}
        for p in sorted(self._pool.values(), key=lambda p: p.nodes):
            if fit_verdict(p.candidate.memory, limit) == "fits":
                lay = p.candidate.layout
                seen[(lay.tp, lay.pp, lay.ep, lay.cp)] = p.candidate.efficiency
        made: list[Plan] = []
        for kind, e in sorted(seen.items()):
            n = aim(e, kind)
            for _ in range(STEPS):
                if n is None or any(p.nodes <= n for p in made):
                    break  # a shape found no fewer nodes: nothing to gain here
                got = price(n)
                if got is not None and ok(got):
                    made.append(got)
                    break
                nxt = aim(got.candidate.efficiency, kind) if got is not None else None
                n = nxt if nxt is not None and nxt > n else self._with_shape(n + 1, kind)
        if not made:
            return None
        best = min(made, key=lambda p: p.nodes)
        while True:
            sure = [p for p in [*self._pool.values(), *priced.values()] if ok_fit(p)]
            e_max = max(p.candidate.efficiency for p in sure)
            start = max(lo, self.nodes_within(hours, e_max), best.nodes - SCAN)
            found: Plan | None = None
            for n in range(start, best.nodes):
                q = price(n)
                if q is not None and ok(q):
                    found = q
                    break
            if found is None:
                return best
            best = found

    def closest(self) -> Plan:
        """Nothing fits: the most-sharded layout at the largest count we would price."""
        n = self.r.nodes or self.max_nodes
        lays = [
            layout.make_layout(
                s,
                world=n * self.g,
                mbs=self.mbs,
                recompute=self.rc_opts[-1],
                offload_opt=self.off_opts[-1],
                offload_params=False,
            )
            for s in layout.shapes(self.r.job, n, self.g)
        ]
        mem, lay = min(((memory(self.r.job, x), x) for x in lays), key=lambda t: t[0].total)
        cand = self.with_model(
            layout.Candidate(lay, mem, layout.efficiency(lay, self.g), Msg("layout.closest"), 0)
        )
        hours, months, cost = self.cost(n, cand.efficiency)
        self.notes.append(Msg("note.no_fit", {"nodes": n}))
        return Plan(n, cand, hours, months, cost, fits=False)
