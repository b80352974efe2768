"""The judgment: which plan each SKU shows, how options rank, and the headline.

Rules (each has a test through ``size()`` and through the /size page):

- never a platform the customer did not accept (ROCm when ``rocm_ok`` is false), in any
  fallback; when only such a platform fits, there is no headline node and the sales path;
- a stated deadline is met whenever some option meets it (even if that takes a cluster that
  is a sales conversation); when none does, the fastest plan, and we say so;
- among plans within ``NEAR_CHEAPEST`` of the cheapest total cost, the soonest finish; for
  that SKU, the fewest nodes that finish within the same number of rented months;
- a plan over 12 months is never the headline when more self-serve nodes finish within 12
  months for at most ``YEAR_PREMIUM`` more; when nothing self-serve finishes within 12
  months, the headline is "talk to sales" with the cluster plan;
- a single GPU is suggested only when one GPU finishes the run within the deadline (or a
  month without one), and then with that time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.catalog.specs import NodeSpec, all_specs
from app.sizing import compute
from app.sizing.memory import SAFETY_MARGIN, Layout, fit_verdict, memory
from app.sizing.messages import Msg, Translate, render
from app.sizing.options import DEADLINE_SLACK, Option, plain_number
from app.sizing.params import pick
from app.sizing.request import Request
from app.sizing.search import HOURS_PER_YEAR, Plan, SkuSearch

NEAR_CHEAPEST = 0.05  # plans within 5 % of the cheapest count as equally cheap
YEAR_PREMIUM = 0.10  # how much more a plan may cost to finish within 12 months
SINGLE_GPU_SKU = "hgx-h100"
SINGLE_GPU_DEFAULT_HOURS = compute.HOURS_PER_MONTH  # "or a month" when there is no deadline

T = TypeVar("T")


def accepts(spec_vendor: str, r: Request) -> bool:
    """Whether the customer accepted this platform (AMD needs a stack that runs on ROCm)."""
    return r.rocm_ok or spec_vendor != "amd"


def _near_soonest(pool: Sequence[T], cost: Callable[[T], float], hours: Callable[[T], float]) -> T:
    cheapest = min(cost(x) for x in pool)
    near = [x for x in pool if cost(x) <= cheapest * (1 + NEAR_CHEAPEST)]
    return min(near, key=lambda x: (hours(x), cost(x)))


def rank(pool: Sequence[T], cost: Callable[[T], float], hours: Callable[[T], float]) -> list[T]:
    """Plans within NEAR_CHEAPEST of the cheapest, soonest first; then the rest by cost."""
    if not pool:
        return []
    floor = min(cost(x) for x in pool) * (1 + NEAR_CHEAPEST)
    near = sorted((x for x in pool if cost(x) <= floor), key=lambda x: (hours(x), cost(x)))
    rest = sorted((x for x in pool if cost(x) > floor), key=lambda x: (cost(x), hours(x)))
    return near + rest


def _pc(p: Plan) -> float:
    return float(p.cost_cents)


def _ph(p: Plan) -> float:
    return p.hours


def _fewest_same_months(p: Plan, pool: Sequence[Plan]) -> Plan:
    same = [q for q in pool if q.months <= p.months and q.nodes <= p.nodes]
    return min(same, key=lambda q: (q.nodes, q.hours)) if same else p


def choose_plan(plans: Sequence[Plan], s: SkuSearch) -> Plan:
    """The node count this SKU's card shows.

    When ``s.bounded``, ``plans`` holds self-serve counts only: the cluster plan of the
    year or deadline rule (the fewest nodes beyond the self-serve limit that finish in
    time) comes from ``s.fewest_within``, and the year rule's "more self-serve nodes for
    at most 10 % more" looks at every self-serve count (``s.self_serve_plans``).
    """
    # a plan whose upper memory estimate fits beats a tight one (issue 16)
    limit = s.usable * (1 - SAFETY_MARGIN)
    plans = [p for p in plans if fit_verdict(p.candidate.memory, limit) == "fits"] or plans
    if len(plans) == 1 and not s.bounded:
        return plans[0]

    def cluster(hours: float) -> list[Plan]:
        if s.bounded:
            got = s.fewest_within(hours)
            return [got] if got is not None else []
        return [p for p in plans if p.hours <= hours]

    ss = [p for p in plans if p.nodes <= s.self_serve_cap]
    if s.r.max_days:
        dl = s.r.max_days * 24 * DEADLINE_SLACK

        def finish(p: Plan) -> float:  # delivery + training; no promised date: never
            f = s.finish_hours(p)
            return math.inf if f is None else f

        ok = [p for p in ss if finish(p) <= dl]
        if ok:
            return _fewest_same_months(_near_soonest(ok, _pc, _ph), ok)
        if s.delivery is None:
            met = cluster(dl)
        else:  # beyond self-serve, per delivery step: what trains in the time left
            met = [
                p
                for up_to, days in s.delivery
                if up_to > s.self_serve_cap and dl > days * 24
                for p in cluster(dl - days * 24)
                if finish(p) <= dl
            ]
        if met:
            return min(met, key=lambda p: p.nodes)
        priced = [*plans, *s.extra_plans.values()] if s.bounded else list(plans)
        if all(finish(p) == math.inf for p in priced):
            # no count has a promised date (sales sets it): the fewest nodes whose training
            # alone fits the deadline, not the fastest run ``priced`` holds
            trains = [p for p in priced if p.hours <= dl] or cluster(dl)
            if trains:
                return min(trains, key=lambda p: p.nodes)
        # the earliest finish (delivery included), then the fastest run
        return min(priced, key=lambda p: (finish(p), p.hours, p.cost_cents))
    pool = ss or list(plans)
    best = _fewest_same_months(_near_soonest(pool, _pc, _ph), pool)
    if best.hours > HOURS_PER_YEAR:
        within = [q for q in pool if q.hours <= HOURS_PER_YEAR]
        if within and s.bounded:
            every = s.self_serve_plans()
            every = [q for q in every if fit_verdict(q.candidate.memory, limit) == "fits"]
            within = [q for q in every if q.hours <= HOURS_PER_YEAR]
        cheap = [q for q in within if q.cost_cents <= best.cost_cents * (1 + YEAR_PREMIUM)]
        if cheap:
            return min(cheap, key=lambda q: q.nodes)
        if not within:
            year = cluster(HOURS_PER_YEAR)
            if year:
                return min(year, key=lambda q: q.nodes)
    return best


# --- the headline ---------------------------------------------------------------------------


@dataclass
class Recommendation:
    sku: str | None
    nodes: int | None
    talk_to_sales: bool
    reasons: list[Msg]
    single_gpu: Msg | None
    option: Option | None = None
    runner_up: Option | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        parts = ([self.single_gpu] if self.single_gpu else []) + self.reasons
        main = self.reasons[0]
        d: dict[str, Any] = {
            "sku": self.sku,
            "nodes": self.nodes,
            "reason": " ".join(render(m, translate) for m in parts),
            "reason_code": main.as_dict(),
            "reason_codes": [m.as_dict() for m in parts],
            "talk_to_sales": self.talk_to_sales,
            "single_gpu_offer": self.single_gpu is not None,
        }
        if self.single_gpu is not None:
            d["single_gpu_days"] = round(float(self.single_gpu.params["days"]), 2)
        if self.option is not None:
            d["months"] = self.option.months
            d["utilisation_of_rented_time"] = self.option.extra.get("utilisation_of_rented_time")
        if self.runner_up is not None:
            d["runner_up"] = pick(
                self.runner_up, ("sku", "nodes", "rental_cost_usd", "training_days")
            )
        d.update(self.extra)
        return d


def _oc(o: Option) -> float:
    return float(o.cost_cents or 0)


def _oh(o: Option) -> float:
    return float(o.hours or 0)


def _of(o: Option) -> float:
    """Days from today until the run ends (delivery + training); no promised date: never."""
    f = o.extra.get("finish_days")
    return math.inf if f is None else float(f)


def short_name(name: str) -> str:
    """ "8 × AMD Instinct MI355X" → "AMD Instinct MI355X" (the count is said separately)."""
    return re.sub(r"^\d+\s*×\s*", "", name)


def _facts(o: Option) -> dict[str, Any]:
    return {
        "nodes": o.nodes,
        "name": short_name(o.name),
        "gpus": o.gpus,
        "days": (o.hours or 0) / 24,
        "months": o.months,
        "cost_usd": o.rental_cost_usd,
        "mfu_pct": float(o.extra.get("effective_mfu", 0)) * 100,
    }


def recommend(
    options: list[Option], r: Request, specs: dict[str, NodeSpec], single: Msg | None
) -> Recommendation:
    fitting = [o for o in options if o.fits and o.hours is not None]
    # an option whose upper memory estimate also fits beats a tight one; a tight option is
    # the headline only when nothing else fits, with a warning
    sure = [o for o in fitting if o.extra.get("fit") != "tight"]
    tight_only = not any(accepts(specs[o.sku].vendor, r) for o in sure)
    if not tight_only:
        fitting = sure
    accepted = [o for o in fitting if accepts(specs[o.sku].vendor, r)]
    if not accepted:
        if fitting:
            o = min(fitting, key=_oc)
            return Recommendation(
                None,
                None,
                r.sku is None,  # their own pick: a box to tick, not a sales conversation
                # a node the customer picked fits, but only on a stack they did not accept:
                # say so, not "only it fits" (every node may fit; they chose this one)
                [
                    Msg(
                        "reason.picked_unaccepted_platform"
                        if r.sku is not None
                        else "reason.only_unaccepted_platform",
                        {"name": short_name(o.name)},
                    )
                ],
                single,
            )
        refused = [m for o in options for m in o.notes if m.code == "note.framework_layout"]
        if options and len(refused) == len(options):  # the stack cannot run the layout set
            why = Msg("reason.framework_layout", refused[0].params)
            return Recommendation(None, None, False, [why], single)
        return Recommendation(None, None, False, [Msg("reason.nothing_fits")], single)
    dl = r.max_days * 24 * DEADLINE_SLACK if r.max_days else None
    reasons: list[Msg] = []
    pool: list[Option]
    if dl is not None:
        met = [o for o in accepted if o.meets_deadline]
        ss = [o for o in met if not o.talk_to_sales]
        if met:
            pool = ss or met
            best = _near_soonest(pool, _oc, _oh)
            code = "reason.deadline" if ss else "reason.sales_deadline"
            reasons.append(Msg(code, {**_facts(best), "max_days": plain_number(r.max_days)}))
        else:
            pool = sorted(accepted, key=lambda o: (_of(o), _oh(o), _oc(o)))
            best = pool[0]
            f = best.extra.get("finish_days")
            if f is None and best.hours is not None and best.hours <= dl:
                # it trains in time; only the delivery date is not ours to promise
                reasons.append(
                    Msg(
                        "reason.deadline_no_date",
                        {**_facts(best), "max_days": plain_number(r.max_days)},
                    )
                )
            elif best.extra.get("delivery_days") and f is not None:
                reasons.append(
                    Msg(
                        "reason.deadline_missed_finish",
                        {
                            **_facts(best),
                            "max_days": plain_number(r.max_days),
                            "lead_days": best.extra["delivery_days"],
                            "finish_days": f,
                            "finish_day": math.ceil(f - 1e-9),  # as its finish date counts
                        },
                    )
                )
            else:
                reasons.append(
                    Msg(
                        "reason.deadline_missed",
                        {**_facts(best), "max_days": plain_number(r.max_days)},
                    )
                )
    else:
        ss = [o for o in accepted if not o.talk_to_sales]
        if ss:
            pool = ss
            best = _near_soonest(ss, _oc, _oh)
            code = "reason.cheapest"
            params: dict[str, Any] = {**_facts(best), "tie_pct": round(NEAR_CHEAPEST * 100)}
            if best.hours is not None and best.hours > HOURS_PER_YEAR:
                within = [o for o in ss if _oh(o) <= HOURS_PER_YEAR]
                cheap = [o for o in within if _oc(o) <= _oc(best) * (1 + YEAR_PREMIUM)]
                cluster = [o for o in accepted if o.talk_to_sales and _oh(o) <= HOURS_PER_YEAR]
                if cheap:
                    pool, best = cheap, _near_soonest(cheap, _oc, _oh)
                    code = "reason.within_year"
                    params = {**_facts(best), "extra_pct": round(YEAR_PREMIUM * 100)}
                elif not within and cluster:
                    pool, best = cluster, _near_soonest(cluster, _oc, _oh)
                    code = "reason.sales_cluster"
                    params = _facts(best)
            reasons.append(Msg(code, params))
        else:
            pool = accepted
            within = [o for o in accepted if _oh(o) <= HOURS_PER_YEAR]
            best = _near_soonest(within or accepted, _oc, _oh)
            code = "reason.sales_rack" if not best.self_serve else "reason.sales_cluster"
            if best.self_serve and r.nodes is not None and within:
                # the customer pinned a count beyond self-serve: the run itself is short
                code = "reason.sales_pinned"
            reasons.append(Msg(code, _facts(best)))
    if tight_only:
        reasons.append(Msg("reason.tight_only"))
    util = best.extra.get("utilisation_of_rented_time")
    if util is not None:
        reasons.append(Msg("reason.utilisation", {"pct": float(util) * 100, "months": best.months}))
    amd = [o for o in fitting if not accepts(specs[o.sku].vendor, r) and not o.talk_to_sales]
    if amd:
        a = min(amd, key=_oc)
        if _oc(a) < _oc(best):
            reasons.append(
                Msg(
                    "reason.rocm_cheaper",
                    {"nodes": a.nodes, "name": a.name, "cost_usd": a.rental_cost_usd},
                )
            )
    if best.runner_up is not None:
        reasons.append(Msg("reason.runner_up_layout", {"layout": best.runner_up.label}))
    ranked = [o for o in rank(pool, _oc, _oh) if o is not best]
    ru = ranked[0] if ranked else None
    if ru is not None:
        reasons.append(
            Msg(
                "reason.next_best",
                {
                    "nodes": ru.nodes,
                    "name": ru.name,
                    "cost_usd": ru.rental_cost_usd,
                    "days": _oh(ru) / 24,
                },
            )
        )
    return Recommendation(
        best.sku, best.nodes, best.talk_to_sales, reasons, single, option=best, runner_up=ru
    )


def single_gpu(r: Request, flops: float) -> Msg | None:
    """A single-GPU suggestion, only when one GPU finishes within the deadline (or a month)."""
    spec = next((s for s in all_specs() if s.id == SINGLE_GPU_SKU), None)
    if spec is None:
        return None
    limit_hours = r.max_days * 24 if r.max_days else SINGLE_GPU_DEFAULT_HOURS
    mbs = int(r.fixed["micro_batch_size"])
    for rc in ("none", "selective", "full"):
        lay = Layout("ddp", 1, 1, 1, 1, 1, mbs, rc, False, False, 1)
        if memory(r.job, lay).total <= spec.usable_gpu_memory_bytes * (1 - SAFETY_MARGIN):
            mfu = r.mfu if r.mfu is not None else spec.default_mfu
            hours = (
                compute.training_seconds(flops, 1, compute.peak_tflops(spec, r.job.precision), mfu)
                / 3600
            )
            if hours <= limit_hours:
                return Msg(
                    "reason.single_gpu", {"gpu_gb": f"{spec.gpu_memory_gb:g}", "days": hours / 24}
                )
            return None
    return None
