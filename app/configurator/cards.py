"""The /size cards and headline: an engine answer (its JSON shape) in the page's words.

Everything a card shows about one option (memory bar, layout rows, time and its range,
finish date, money, storage, notes) and the headline, rendered in the reader's language
from the engine's codes. Pure formatting: no database, no request.
"""

from __future__ import annotations

import json
import re
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from app import sizing
from app.catalog.specs import NodeSpec
from app.configurator import forms
from app.configurator.charts import memory_bar, memory_bar_svg
from app.errors import N_
from app.messages import format_day
from app.sizing.comm import comm_pattern
from app.sizing.messages import Msg, days_text
from app.sizing.messages import render as render_msg
from app.sizing.stacks import NAMES
from app.web.i18n import gettext as _
from app.web.i18n import punct
from app.web.templating import format_bytes, format_money, format_number, product_name

# The cluster request form (quotes domain). A plain path: the route lives in another branch.
CLUSTER_REQUEST_PATH = "/cluster-request"
# Notes the card already shows in its own words (fit bar, verdict, utilisation row).
CARD_HIDDEN_NOTES = frozenset(
    {
        "note.fits",
        "note.needs_memory",
        "note.hourly_cheaper",
        "note.utilisation",
        "note.no_promised_date",  # the card's finish line says it
    }
)

SHARDING_TEXT = {
    "ddp": N_("Plain data parallel (every GPU holds the whole model state)"),
    "zero1": N_("ZeRO-1 (optimizer state sharded)"),
    "zero2": N_("ZeRO-2 (optimizer state and gradients sharded)"),
    "zero3": N_("FSDP / ZeRO-3 (everything sharded)"),
}
FRAMEWORK_TEXT = NAMES  # the stacks by name, as the form offers them
RECOMPUTE_TEXT = {
    "none": N_("No recompute"),
    "selective": N_("Selective recompute"),
    "full": N_("Full recompute"),
}


def _usd(amount: float | None) -> str:
    if amount is None:
        return "—"
    return format_money(round(float(amount) * 100))


def _pct(fraction: float | None) -> str:
    if fraction is None:
        return "—"
    return f"{format_number(float(fraction) * 100)} %"


def _gb(n: float | None) -> str:
    """Memory in GB; a share under 0.1 GB in MB (a 1M-parameter model's weights read
    "0.0 GB")."""
    if n is None:
        return "—"
    if 0 < float(n) < 1e8:
        return f"{format_number(float(n) / 1e6, 1)} MB"
    return f"{format_number(float(n) / 1e9, 1)} GB"


def layout_rows(layout: dict[str, Any]) -> list[tuple[str, str]]:
    """The layout in plain words, as (label, value) rows."""
    rows = [
        (_("Sharding"), _(SHARDING_TEXT.get(layout.get("sharding", ""), "—"))),
    ]
    sg = layout.get("shard_group")
    if sg and layout.get("sharding") != "ddp":
        rows.append((_("Shard group"), _("%(n)s GPUs") % {"n": sg}))
    par = [
        f"{k.upper()} {layout.get(k)}" for k in ("tp", "pp", "ep", "cp") if (layout.get(k) or 1) > 1
    ]
    rows.append((_("Model parallel"), ", ".join(par) if par else _("none (data parallel only)")))
    rows.append((_("Micro-batch"), str(layout.get("micro_batch_size", "—"))))
    rows.append((_("Recompute"), _(RECOMPUTE_TEXT.get(str(layout.get("recompute")), "—"))))
    off = []
    if layout.get("offload_optimizer"):
        off.append(_("optimizer step, master weights and gradients to CPU memory"))
    if layout.get("offload_params"):
        off.append(_("parameters to CPU memory"))
    rows.append((_("Offload"), punct("list").join(off) if off else _("No offload")))
    return rows


def deploy_url(option: dict[str, Any], result: dict[str, Any], form: forms.SizeForm) -> str:
    nodes = int(option["nodes"])
    params = float(result.get("params") or 0)
    tokens = float((form.request or {}).get("tokens") or 0)
    parts = (
        urlencode([("sku", option["sku"]), ("nodes", str(nodes))]),
        # in the reader's language: the engineers' notes are theirs to edit (issue 19)
        _encoded(
            (
                ("note_model_size", _("%(n)s parameters") % {"n": forms.human_count(params)}),
                ("note_token_budget", _("%(n)s tokens") % {"n": forms.human_count(tokens)}),
            )
        ),
        urlencode(
            [
                ("note_node_count", str(nodes)),
                ("note_private_network", "1" if nodes > 1 else "0"),
                ("note_comm_pattern", comm_pattern(option, _)),
            ]
        ),
        _encoded((("sizing", form.query_string()),)),
    )
    return "/deploy?" + "&".join(parts)


@lru_cache(maxsize=256)
def _encoded(pairs: tuple[tuple[str, str], ...]) -> str:
    """``urlencode`` of the parts every card's link repeats (the notes, the whole sizing
    query), encoded once per page rather than once per card."""
    return urlencode(pairs)


def sales_url(
    form: forms.SizeForm,
    sku: str | None = None,
    nodes: int | None = None,
    months: int | None = None,
) -> str:
    """The cluster request form, prefilled with the plan and this sizing attached."""
    q: list[tuple[str, str]] = []
    if sku:
        q.append(("sku", sku))
    if nodes:
        q.append(("nodes", str(nodes)))
    if months:
        q.append(("months", str(months)))
    q.append(("sizing", form.query_string()))
    return CLUSTER_REQUEST_PATH + "?" + urlencode(q)


def say(code: dict[str, Any] | Msg) -> str:
    """One engine sentence, from its code, in the page's language."""
    return render_msg(code, _)


def time_text(days: float | None) -> str:
    """Training time in the unit a reader can use, as the engine's sentences write it
    (``app.sizing.messages.days_text``: days, hours, minutes)."""
    return "—" if days is None else days_text(float(days), _)


def time_range_text(o: dict[str, Any]) -> str | None:
    """The fast and slow ends of the training time for the customer's stack."""
    rng = o.get("training_days_range")
    if not rng or o.get("training_days") is None or rng[0] == rng[1]:
        return None
    return _("%(fast)s (a tuned run) to %(slow)s (a first-week run) on %(framework)s") % {
        "fast": time_text(rng[0]),
        "slow": time_text(rng[1]),
        "framework": FRAMEWORK_TEXT.get(str(o.get("framework")), str(o.get("framework"))),
    }


def finish_text(o: dict[str, Any]) -> str | None:
    """When the run ends: the promised delivery of this node count, then training."""
    if o.get("layout") is None or o.get("training_days") is None:
        return None
    finish = o.get("finish_date")
    if finish is None:
        if o.get("finish_days") is None and o.get("delivery_days") is None:
            return _("No delivery date we can promise for this count: talk to sales.")
        return None
    lo, hi = o.get("finish_date_range") or (finish, finish)
    params = {
        "lead": format_number(o.get("delivery_days") or 0, 0),
        "date": format_day(date.fromisoformat(finish)),
        "early": format_day(date.fromisoformat(lo)),
        "late": format_day(date.fromisoformat(hi)),
    }
    if lo == hi:
        return _("Delivered in %(lead)s days, finishes %(date)s.") % params
    return _("Delivered in %(lead)s days, finishes %(date)s (%(early)s to %(late)s).") % params


def mfu_text(o: dict[str, Any]) -> str:
    """The card's MFU: the throughput model's for the customer's stack (one truth per
    framework), or the customer's own figure."""
    pct = _pct(o.get("effective_mfu") or o.get("mfu"))
    if o.get("layout") is None:
        return "—"
    if o.get("mfu_model") == "throughput":
        fw = str(o.get("framework"))
        return _("%(pct)s on %(framework)s") % {"pct": pct, "framework": FRAMEWORK_TEXT.get(fw, fw)}
    return _("%(pct)s (yours)") % {"pct": pct}


def weights_where(mem: dict[str, Any]) -> str | None:
    """Where the weights are when the working-copy row reads zero (FSDP2: the FP32 master
    copy is the sharded parameter; BF16 exists only while a unit is gathered)."""
    if not mem or mem.get("weights") or not mem.get("master_weights"):
        return None
    return _(
        "The weights are the FP32 master copy, sharded (%(master)s per GPU); a layer's BF16 "
        "copy exists only while it is gathered, inside the framework overhead."
    ) % {"master": _gb(mem.get("master_weights"))}


@lru_cache(maxsize=1)
def _accuracy() -> dict[str, Any]:
    """The public-set accuracy (app/sizing/accuracy.json, written by
    ``python -m bench.throughput_accuracy``)."""
    path = Path(sizing.__file__).with_name("accuracy.json")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def accuracy(framework: str) -> dict[str, Any]:
    """How close the answer's time and memory have come on public runs, in words."""
    acc = _accuracy()
    t = acc["time"].get(framework) or {}
    m = acc["memory"]
    name = FRAMEWORK_TEXT.get(framework, framework)
    if t.get("cases"):
        time = _(
            "Training time on %(n)s published %(framework)s runs: off by %(err)s %% (median); "
            "%(inside)s %% fall inside the range we show."
        ) % {
            "n": t["cases"],
            "framework": name,
            "err": format_number(t["median_abs_error_pct"], 1),
            "inside": format_number(t["inside_range_pct"], 0),
        }
    else:
        time = _(
            "No published %(framework)s run is in our set yet: its time starts from FSDP2's "
            "and carries the widest range we give."
        ) % {"framework": name}
    memory = _(
        "Memory per GPU on %(n)s published runs with a measured peak: off by %(err)s %% "
        "(median); whether a run fits was right on %(right)s of %(all)s runs (some report "
        "only that they ran or ran out of memory)."
    ) % {
        "n": m["cases"],
        "err": format_number(m["median_abs_error_pct"], 1),
        "right": m["fit_verdicts_right"],
        "all": m["fit_verdicts"],
    }
    rows = [
        (
            FRAMEWORK_TEXT.get(fw, fw),
            v["cases"],
            format_number(v["median_abs_error_pct"], 1) + " %" if v["cases"] else "—",
            format_number(v["inside_range_pct"], 0) + " %" if v["cases"] else "—",
        )
        for fw, v in sorted(acc["time"].items())
    ]
    return {"time": time, "memory": memory, "rows": rows}


def _verdict(o: dict[str, Any]) -> tuple[bool, str]:
    rent = o.get("rental_cost_usd")
    hourly = o.get("hourly_alternative_usd")
    be = o.get("break_even_utilisation")
    if rent is None or hourly is None:
        return True, ""
    # "busy more than 100 % of the rented time" is "all month" (a break-even that rounds to
    # 100 % included; issue 19, defect 7).
    if hourly < rent and (be is None or float(be) >= 0.995):
        text = _(
            "Paying by the hour elsewhere would be cheaper for this run "
            "(%(hourly)s against %(monthly)s), even with the nodes busy all month."
        ) % {"hourly": _usd(hourly), "monthly": _usd(rent)}
        return False, text
    if hourly < rent:
        text = _(
            "Paying by the hour elsewhere would be cheaper for this run "
            "(%(hourly)s against %(monthly)s). Monthly pays off when the nodes are busy "
            "more than %(be)s of the rented time."
        ) % {"hourly": _usd(hourly), "monthly": _usd(rent), "be": _pct(be)}
        return False, text
    text = _(
        "Monthly is cheaper than paying by the hour elsewhere (%(monthly)s against "
        "%(hourly)s). Break-even utilisation: %(be)s."
    ) % {"hourly": _usd(hourly), "monthly": _usd(rent), "be": _pct(be)}
    return True, text


def card(
    o: dict[str, Any], result: dict[str, Any], form: forms.SizeForm, spec: NodeSpec | None
) -> dict[str, Any]:
    mem = o.get("memory_per_gpu_bytes") or {}
    usable = float(o.get("usable_gpu_memory_bytes") or 0)
    limit = o.get("memory_limit_bytes")
    bar = memory_bar(mem, usable, limit)
    # the catalogue's name in the reader's words (a rack is 整机柜 in Chinese), as everywhere
    name = product_name(re.sub(r"^\d+\s*×\s*", "", str(o.get("name") or o["sku"])))
    total = bar.total
    headroom = o.get("headroom_bytes")
    shortfall = o.get("shortfall_bytes")
    desc = _(
        "%(total)s per GPU of %(usable)s usable: weights %(w)s, gradients %(g)s, "
        "master weights %(m)s, optimizer %(o)s, activations %(a)s, overhead %(x)s."
    ) % {
        "total": _gb(total),
        "usable": _gb(usable),
        "w": _gb(mem.get("weights")),
        "g": _gb(mem.get("gradients")),
        "m": _gb(mem.get("master_weights")),
        "o": _gb(mem.get("optimizer_states")),
        "a": _gb(mem.get("activations")),
        "x": _gb(mem.get("overhead")),
    }
    svg = memory_bar_svg(
        bar,
        svg_id=f"mem-{o['sku']}",
        title=_("Memory per GPU on %(name)s") % {"name": name},
        desc=desc,
        limit_label=_("Fit limit: %(limit)s") % {"limit": _gb(bar.limit)},
    )
    cheaper_monthly, verdict = _verdict(o)
    st = o.get("storage") or {}
    talk = bool(o.get("talk_to_sales"))
    fits = bool(o.get("fits"))
    notes = [say(n) for n in (o.get("note_codes") or []) if n["code"] not in CARD_HIDDEN_NOTES]
    util = o.get("utilisation_of_rented_time")
    fit_said = {c["code"]: say(c) for c in (o.get("fit_codes") or [])}
    return {
        "sku": o["sku"],
        "name": name,
        "fits": fits,
        "tight": fits and o.get("fit") == "tight",
        "range_text": fit_said.get("fit.range"),
        "tight_text": fit_said.get("fit.tight"),
        "talk_to_sales": talk,
        "nodes": o.get("nodes"),
        "gpus": o.get("gpus"),
        "layout": layout_rows(o.get("layout") or {}),
        "svg": svg,
        "segments": [(_(s.label), s.css, _gb(s.bytes)) for s in bar.segments],
        "total": _gb(total),
        # also in GiB, as the node pages state it ("85.5 GB usable" beside "80 GB" read as
        # more memory than the GPU has: it is 79.6 GiB)
        "usable": f"{_gb(usable)} ({format_number(usable / 2**30, 1)} GiB)",
        "limit": _gb(bar.limit),
        "headroom": _gb(headroom) if headroom else None,
        "shortfall": _gb(shortfall) if shortfall else None,
        "days": format_number(o.get("training_days"), 1),
        "time": time_text(o.get("training_days")),
        "time_range": time_range_text(o),
        "finish": finish_text(o),
        "unbuildable": None if o.get("layout") is not None else (notes[0] if notes else ""),
        "weights_where": weights_where(mem),
        "months": o.get("months"),
        "cost": _usd(o.get("rental_cost_usd")),
        "usd_gpu_hour": _usd(o.get("effective_usd_per_gpu_hour")),
        "usd_gpu_hour_24_7": _usd(o.get("usd_per_gpu_hour_24_7")),
        "utilisation": _pct(util) if util is not None else None,
        "mfu": mfu_text(o),
        "mfu_source": o.get("mfu_source"),
        "cheaper_monthly": cheaper_monthly,
        "verdict": verdict,
        "checkpoint": format_bytes(st.get("checkpoint_bytes")),
        # GB below a terabyte: a billion-token fine-tuning set is a few GB, not "0.00 TB"
        "dataset": format_bytes(st.get("dataset_bytes")),
        # None when the node's local NVMe is not on record (the GB300 rack): left unsaid
        "nvme": None
        if st.get("nvme_bytes_per_node") is None
        else format_bytes(st.get("nvme_bytes_per_node")),
        "dataset_fits": st.get("dataset_fits_nvme"),
        "checkpoints_fit": st.get("checkpoints_fit_on_nvme"),
        # a card that cannot run says why once, in its own place (not again in the notes)
        "notes": notes if o.get("layout") is not None else notes[1:],
        "use_url": deploy_url(o, result, form) if fits and not talk else None,
        "sales_url": sales_url(form, o["sku"], o.get("nodes"), o.get("months")) if talk else None,
    }


def recommendation(
    result: dict[str, Any], cards: list[dict[str, Any]], form: forms.SizeForm
) -> dict[str, Any]:
    """The headline, rendered from the engine's reason codes in the page's language."""
    rec = result.get("recommendation") or {}
    by_sku = {c["sku"]: c for c in cards}
    best = by_sku.get(rec.get("sku") or "")
    codes = list(rec.get("reason_codes") or [])
    single = next((c for c in codes if c["code"] == "reason.single_gpu"), None)
    tight = next((c for c in codes if c["code"] == "reason.tight_only"), None)
    out: dict[str, Any] = {
        "card": best,
        "talk_to_sales": bool(rec.get("talk_to_sales")),
        "single_gpu": say(single) if single else None,
        "tight_warning": say(tight) if tight else None,
        "why": " ".join(say(c) for c in codes if c is not single and c is not tight),
        "reason_code": (rec.get("reason_code") or {}).get("code"),
    }
    if best is None and out["talk_to_sales"]:
        out["sales_url"] = sales_url(form)
    if out["reason_code"] == "reason.picked_unaccepted_platform":
        # the one box to tick: the same job with "my stack runs on ROCm"
        out["rocm_url"] = "/size?" + urlencode([*parse_qsl(form.query_string()), ("rocm", "1")])
    return out
