"""One option: a SKU at a node count with a layout, evaluated into a typed :class:`Option`.

:func:`evaluate_option` is the one place an option's figures and notes are computed; new
per-option outputs (memory ranges, fit classes, a throughput model) belong here, as fields
of :class:`Option` and keys of :meth:`Option.as_dict`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.sizing import compute
from app.sizing.layout import Candidate
from app.sizing.memory import SAFETY_MARGIN, Memory, fit_verdict, memory_range, resolve_layout
from app.sizing.messages import Msg, Translate, render, render_all
from app.sizing.params import pick
from app.sizing.profiles import profile, tokens_range
from app.sizing.search import Plan, SkuSearch

DEADLINE_SLACK = 1.0001


@dataclass
class Option:
    """A SKU at a node count, with everything the page and the API show about it."""

    sku: str
    name: str
    self_serve: bool
    talk_to_sales: bool
    nodes: int
    gpus: int
    fits: bool
    layout: dict[str, Any] | None
    layout_label: Msg | None
    memory: Memory | None
    usable_gpu_memory_bytes: int
    mfu: float
    hours: float | None = None
    months: int | None = None
    cost_cents: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # figures serialised as they are
    runner_up: Candidate | None = None
    meets_deadline: bool | None = None
    notes: list[Msg] = field(default_factory=list)
    storage: dict[str, Any] | None = None

    @property
    def training_days(self) -> float | None:
        return None if self.hours is None else self.hours / 24  # unrounded; pages round it

    @property
    def rental_cost_usd(self) -> float | None:
        return None if self.cost_cents is None else compute.cents_to_usd(self.cost_cents)

    def as_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        """Today's JSON shape, notes rendered in ``translate``'s language plus their codes."""
        head = pick(self, ("sku", "name", "self_serve", "talk_to_sales", "nodes", "gpus"))
        if self.layout is None:
            d: dict[str, Any] = {
                **head,
                "fits": False,
                "layout": None,
                "memory_per_gpu_bytes": None,
                "memory_range_bytes": None,
                "fit": "does_not_fit",
                "usable_gpu_memory_bytes": self.usable_gpu_memory_bytes,
                "training_days": None,
                "mfu": self.mfu,
                "months": None,
                "rental_cost_usd": None,
                "effective_usd_per_gpu_hour": None,
                "hourly_alternative_usd": None,
            }
        else:
            assert self.memory is not None
            d = {
                **head,
                "fits": self.fits,
                "layout": dict(self.layout),
                "layout_description": render(self.layout_label, translate)
                if self.layout_label
                else "",
                "layout_description_code": self.layout_label.as_dict()
                if self.layout_label
                else None,
                "memory_per_gpu_bytes": self.memory.as_dict(),
                "overhead_breakdown_bytes": self.memory.overhead_breakdown(),
                "usable_gpu_memory_bytes": self.usable_gpu_memory_bytes,
                "training_days": self.training_days,
                "mfu": self.mfu,
                "months": self.months,
                "rental_cost_usd": self.rental_cost_usd,
                **self.extra,
            }
            if self.runner_up is not None:
                d["runner_up"] = {
                    "layout": self.runner_up.layout.as_dict(),
                    "description": render(self.runner_up.label, translate),
                    "description_code": self.runner_up.label.as_dict(),
                    "memory_total_bytes": self.runner_up.memory.total,
                    "layout_efficiency": round(self.runner_up.efficiency, 4),
                }
            d["meets_deadline"] = self.meets_deadline
        d["notes"] = render_all(self.notes, translate)
        d["note_codes"] = [n.as_dict() for n in self.notes]
        if self.storage is not None:
            d["storage"] = copy.deepcopy(self.storage)
        return d


def unbuildable_option(s: SkuSearch, nodes: int, why: Msg) -> Option:
    spec = s.spec
    return Option(
        sku=spec.id,
        name=spec.name,
        self_serve=spec.self_serve,
        talk_to_sales=not spec.self_serve,
        nodes=nodes,
        gpus=nodes * s.g,
        fits=False,
        layout=None,
        layout_label=None,
        memory=None,
        usable_gpu_memory_bytes=s.usable,
        mfu=s.mfu if not s.modelled else spec.default_mfu,
        notes=[why],
    )


def fit_codes(likely: int, low: int, high: int, limit: int, verdict: str) -> list[dict[str, Any]]:
    """The memory range as a sentence, and for a tight option why it is tight."""
    gb = {
        "likely_gb": likely / 1e9,
        "low_gb": low / 1e9,
        "high_gb": high / 1e9,
        "limit_gb": limit / 1e9,
    }
    out = [Msg("fit.range", gb).as_dict()]
    if verdict == "tight":
        out.append(Msg("fit.tight", gb).as_dict())
    return out


def evaluate_option(s: SkuSearch, plan: Plan, runner_up: Candidate | None) -> Option:
    """The option for ``plan`` (a layout on ``plan.nodes`` nodes of ``s.spec``)."""
    spec, r, g = s.spec, s.r, s.g
    cand = plan.candidate
    mem, lay, eff = cand.memory, cand.layout, cand.efficiency
    n, hours, months, cost = plan.nodes, plan.hours, plan.months, plan.cost_cents
    gpus = n * g
    usable = s.usable
    limit = int(usable * (1 - SAFETY_MARGIN))
    hourly = spec.hourly_elsewhere_cents_per_gpu_hour
    alt_cents = math.ceil(gpus * hours * hourly)
    eff_rate = cost / (gpus * hours) if hours > 0 else float(s.price) / g / compute.HOURS_PER_MONTH
    utilisation = min(1.0, hours / (months * compute.HOURS_PER_MONTH))
    notes = list(s.notes)
    meets = (hours <= r.max_days * 24 * DEADLINE_SLACK) if r.max_days else None
    talk = not spec.self_serve or n > SELF_SERVE_MAX_NODES
    lo, hi = memory_range(mem)
    verdict = fit_verdict(mem, limit) if plan.fits else "does_not_fit"
    extra = {
        # likely value ± what the model cannot know; fits | tight | does_not_fit
        "memory_range_bytes": [lo, hi],
        "fit": verdict,
        # the range and the fit class as sentences (codes), for pages and PDFs
        "fit_codes": fit_codes(mem.total, lo, hi, limit, verdict),
        "framework": r.job.framework,
        "memory_limit_bytes": limit,
        "headroom_bytes": max(0, limit - mem.total),
        "shortfall_bytes": max(0, mem.total - limit),
        "host_offload_bytes_per_node": mem.cpu_offload_per_gpu * g,
        "node_ram_bytes": s.host,
        "mfu_source": "throughput model (app/sizing/throughput.py; docs/sizing-accuracy.md)"
        if s.modelled
        else spec.mfu_source,
        "mfu_model": "throughput" if s.modelled else "request",
        "layout_efficiency": 1.0 if s.modelled else round(eff, 4),
        "effective_mfu": round(s.mfu * eff, 4),
        "peak_tflops_per_gpu": s.peak,
        "unit_price_usd_month": compute.cents_to_usd(s.price),
        # what this run costs per GPU-hour it actually computes (whole months spread over it)
        "effective_usd_per_gpu_hour": compute.cents_to_usd(eff_rate),
        # the 24/7 rate: the monthly price per GPU-hour of the month
        "usd_per_gpu_hour_24_7": compute.cents_to_usd(s.price / (g * compute.HOURS_PER_MONTH)),
        "hourly_alternative_usd": compute.cents_to_usd(alt_cents),
        "hourly_elsewhere_usd_per_gpu_hour": compute.cents_to_usd(hourly),
        "break_even_utilisation": round(compute.break_even_utilisation(s.price, g, hourly), 4),
        "utilisation_of_rented_time": round(utilisation, 4),
    }
    tok_s = s.tokens_per_s_per_gpu(lay)
    if s.modelled and tok_s is not None:
        extra["predicted_tokens_per_s_per_gpu"] = round(tok_s, 1)
    timing = time_range(s, n, hours, tok_s if s.modelled else None)
    extra.update(timing.as_dict())
    if r.max_days:
        finish = timing.finish_hours
        meets = finish is not None and finish <= r.max_days * 24 * DEADLINE_SLACK
    if timing.slow_months > months:
        notes.append(
            Msg(
                "note.slow_end_month",
                {
                    "days": timing.slow_hours / 24,
                    "months": months,
                    "slow_months": timing.slow_months,
                },
            )
        )
    if timing.lead_days is None and s.delivery is not None:
        notes.append(Msg("note.no_promised_date", {"nodes": n}))
    if meets is False and timing.lead_days:
        notes.append(
            Msg(
                "note.misses_deadline_delivery",
                {
                    "max_days": plain_number(r.max_days),
                    "lead_days": timing.lead_days,
                    "days": hours / 24,
                    "finish_days": (timing.finish_hours or 0) / 24,
                    # the day it ends on, counted as its finish date is (34.3 days: day 35)
                    "finish_day": math.ceil((timing.finish_hours or 0) / 24 - 1e-9),
                },
            )
        )
    elif meets is False and not (
        timing.lead_days is None and hours <= (r.max_days or 0) * 24 * DEADLINE_SLACK
    ):  # (no promised date, training in time: note.no_promised_date is the reason)
        notes.append(
            Msg("note.misses_deadline", {"max_days": plain_number(r.max_days), "days": hours / 24})
        )
    if spec.self_serve and n > SELF_SERVE_MAX_NODES:
        notes.append(Msg("note.over_self_serve", {"nodes": n, "max_nodes": SELF_SERVE_MAX_NODES}))
    if not spec.self_serve:
        notes.append(
            Msg(
                "note.sales_only_sku",
                {
                    "name": spec.name,
                    "min_months": s.min_months,
                    "max_months": spec.raw.get("max_term_months"),
                },
            )
        )
    if plan.fits:
        notes.append(
            Msg(
                "note.fits",
                {
                    "headroom_gb": (limit - mem.total) / 1e9,
                    "limit_pct": round((1 - SAFETY_MARGIN) * 100),
                    "usable_gib": usable / 1024**3,
                },
            )
        )
        notes.append(Msg("note.utilisation", {"pct": utilisation * 100, "months": months}))
    else:
        notes.append(
            Msg("note.needs_memory", {"need_gb": mem.total / 1e9, "limit_gb": limit / 1e9})
        )
        if (
            mem.cpu_offload_per_gpu
            and s.host is not None
            and mem.cpu_offload_per_gpu * g > s.host * 0.9
        ):
            notes.append(Msg("note.offload_exceeds_ram"))
    if alt_cents < cost:
        notes.append(
            Msg(
                "note.hourly_cheaper",
                {"hourly_usd": alt_cents / 100, "rental_usd": cost / 100},
            )
        )
    if hours > 365 * 24 and plan.fits:
        notes.append(Msg("note.over_a_year", {"years": hours / 24 / 365, "nodes": n}))
    if lay.offload_optimizer:
        notes.append(Msg("note.optimizer_offload"))
    if lay.recompute == "full":
        notes.append(Msg("note.full_recompute"))
    rate = profile(r.job.framework).eager_parallel_rate(r.job.compile, lay.tp, lay.cp, lay.ep)
    if rate < 1.0:
        notes.append(Msg("note.eager_parallel", {"pct": (1.0 - rate) * 100}))
    return Option(
        sku=spec.id,
        name=spec.name,
        self_serve=spec.self_serve,
        talk_to_sales=talk,
        nodes=n,
        gpus=gpus,
        fits=plan.fits,
        layout=resolve_layout(r.job, lay).as_dict(),
        layout_label=cand.label,
        memory=mem,
        usable_gpu_memory_bytes=usable,
        mfu=round(s.mfu * eff, 4) if s.modelled else s.mfu,
        hours=hours,
        months=months,
        cost_cents=cost,
        extra=extra,
        runner_up=runner_up,
        meets_deadline=meets,
        notes=notes,
    )


@dataclass(frozen=True)
class Timing:
    """An option's time as a range and its finish (days from the customer's today)."""

    tokens_range: tuple[float, float] | None  # (slow, fast) tokens/s per GPU
    fast_hours: float
    slow_hours: float
    slow_months: int
    lead_days: float | None  # delivery of this node count; None: no promised date
    finish_hours: float | None
    finish_slow_hours: float | None
    today: date | None

    def _date(self, hours: float | None) -> str | None:
        if hours is None or self.today is None:
            return None
        # the run ends on the day its last hour falls in
        return (self.today + timedelta(days=math.ceil(hours / 24 - 1e-9))).isoformat()

    def as_dict(self) -> dict[str, Any]:
        # the range's ends: the same delivery, then the fast or the slow training time
        fast_finish = None if self.lead_days is None else self.lead_days * 24 + self.fast_hours
        d: dict[str, Any] = {
            "training_days_range": [self.fast_hours / 24, self.slow_hours / 24],
            "months_slow": self.slow_months,
            "delivery_days": self.lead_days,
            "finish_days": None if self.finish_hours is None else self.finish_hours / 24,
            "finish_days_range": None
            if fast_finish is None or self.finish_slow_hours is None
            else [fast_finish / 24, self.finish_slow_hours / 24],
            "finish_date": self._date(self.finish_hours),
            "finish_date_range": None
            if fast_finish is None or self.today is None
            else [self._date(fast_finish), self._date(self.finish_slow_hours)],
        }
        if self.tokens_range is not None:
            d["tokens_per_s_per_gpu_range"] = [round(x, 1) for x in self.tokens_range]
        return d


def time_range(s: SkuSearch, n: int, hours: float, tok_s: float | None) -> Timing:
    """The likely training time ``hours`` as a range for the customer's stack (the fast end
    a tuned run, the slow end a first-week run: app/sizing/profiles.py), and when the run
    finishes: the promised delivery of ``n`` nodes, then training."""
    fast_h = slow_h = hours
    tokens: tuple[float, float] | None = None
    if tok_s is not None and tok_s > 0:
        slow, fast = tokens_range(tok_s, profile(s.r.job.framework))
        tokens = (slow, fast)
        fast_h, slow_h = hours * tok_s / fast, hours * tok_s / slow
    lead = s.lead_days(n)
    finish = None if lead is None else lead * 24 + hours
    return Timing(
        tokens_range=tokens,
        fast_hours=fast_h,
        slow_hours=slow_h,
        slow_months=compute.rental_months(slow_h, min_months=s.min_months),
        lead_days=lead,
        finish_hours=finish,
        finish_slow_hours=None if lead is None else lead * 24 + slow_h,
        today=s.today,
    )


def plain_number(x: float | None) -> int | float | None:
    """A number as the request gave it, for a message's parameters: 30, not "30" or 30.0."""
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x
