"""A quote's input as staff enter it: the SKU, the quantity, the sizing query read back into
the engine's summary, the customer found by email; applied to the quote with its live
list price and delivery promise."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import func
from sqlmodel import Session, select

from app import i18n, pdfdoc
from app.accounts.models import Role, User
from app.catalog import service as catalog
from app.catalog.specs import NodeSpec, all_specs, spec
from app.configurator.forms import human_count, parse_query
from app.errors import N_, InvalidInput
from app.quotes import pricing
from app.quotes.models import Quote
from app.quotes.pricing import QuoteKind
from app.quotes.schemas import QuoteIn
from app.sizing import PRESETS, SizingError, size
from app.sizing.comm import comm_pattern
from app.sizing.messages import Translate

# The engineers' notes a sizing link fills in when sales leave them empty (the counts stay
# "32.8B", "1T" in every language: the unit word is the reader's).
MODEL_SIZE_NOTE = N_("%(n)s params")
TOKEN_BUDGET_NOTE = N_("%(n)s tokens")
NOTE_FIELDS = ("note_model_size", "note_token_budget", "note_comm_pattern")
# What the quote PDF prints of what sales type.
PRINTED_FIELDS = ("prospect_name", "prospect_company", "sizing_notes", "notes")
UNPRINTABLE = N_(
    "Quote PDFs cannot print these characters: {chars}. Write this in Latin, Greek, Cyrillic "
    "or Chinese letters."
)


@dataclass
class QuoteInput:
    prospect_name: str
    prospect_email: str
    prospect_company: str
    sku_id: str
    quantity: int
    months: int
    discount_bp: int
    valid_days: int
    sizing_query: str
    sizing_notes: str
    notes: str
    note_model_size: str = ""
    note_token_budget: str = ""
    note_comm_pattern: str = ""
    sizing_summary: dict[str, Any] = field(default_factory=dict)


def sku_choices() -> list[NodeSpec]:
    return list(all_specs())


def kind_of(sku_id: str) -> str:
    return QuoteKind.rack.value if spec(sku_id).price_per_gpu else QuoteKind.node.value


def sizing_query_of(text: str) -> str:
    """A pasted /size URL, '?a=b' or 'a=b' → the bare query string ('' if none)."""
    t = text.strip()
    if not t:
        return ""
    if "?" in t:
        t = t.split("?", 1)[1]
    elif t.startswith(("http://", "https://", "/")):
        t = urlsplit(t).query
    return t.split("#", 1)[0]


def size_from_query(query: str, sku_id: str, quantity: int) -> tuple[dict[str, Any], str]:
    """Run the sizing engine on a /size query for the quoted SKU and count.

    Returns (summary, canonical query). Raises InvalidInput(field='sizing').
    """

    params = dict(parse_qsl(query, keep_blank_values=False))
    form = parse_query(params, set(PRESETS))
    if not form.ok or form.request is None:
        fields = ", ".join(sorted(form.errors)) or "?"
        raise InvalidInput(
            N_("The sizing link has problems in: {fields}. Open it on the sizing page to fix it."),
            field="sizing",
            fields=fields,
        )
    req = dict(form.request)
    s = spec(sku_id)
    nodes = quantity // s.gpus_per_node if s.price_per_gpu else quantity
    req["sku"] = sku_id
    req["nodes"] = max(1, nodes)
    try:
        result = size(req)
    except SizingError:
        raise InvalidInput(
            N_("The sizing engine could not size this job on the quoted configuration."),
            field="sizing",
        ) from None
    opt = result["options"][0] if result["options"] else {}
    summary = {
        "params": result["params"],
        "params_human": human_count(result["params"]),
        "tokens": req.get("tokens"),
        "tokens_human": human_count(float(req.get("tokens") or 0)),
        "method": req.get("method", "full"),
        "fits": bool(opt.get("fits")),
        "training_days": opt.get("training_days"),
        "layout": opt.get("layout_description", ""),
        "layout_code": opt.get("layout_description_code"),
        "layout_detail": opt.get("layout") or {},
        "comm_pattern": comm_pattern(opt) if opt else "",
        "effective_mfu": opt.get("effective_mfu"),
        "rental_months": opt.get("months"),
        "recommended_sku": result["recommendation"].get("sku"),
        "recommended_nodes": result["recommendation"].get("nodes"),
    }
    return summary, form.query_string()


def note_defaults(
    summary: dict[str, Any], quantity: int, kind: str, translate: Translate
) -> dict[str, str]:
    """The engineers' notes a sizing summary fills in, in the language of ``translate``:
    model size, token budget and, for several nodes, the communication pattern."""
    out = {
        "note_model_size": translate(MODEL_SIZE_NOTE) % {"n": summary.get("params_human", "")},
        "note_token_budget": translate(TOKEN_BUDGET_NOTE) % {"n": summary.get("tokens_human", "")},
        "note_comm_pattern": "",
    }
    if quantity > 1 and kind == QuoteKind.node:
        option = {
            "layout_description": summary.get("layout", ""),
            "layout_description_code": summary.get("layout_code"),
            "layout": summary.get("layout_detail") or {},
            "nodes": quantity,
        }
        out["note_comm_pattern"] = comm_pattern(option, translate)[:300]
    return out


def notes_for_reader(
    summary: dict[str, Any], quantity: int, kind: str, notes: dict[str, str]
) -> dict[str, str]:
    """The quote's notes for the reader's /deploy form: a note that is still the sizing
    link's default (in any language, or the English pattern older quotes stored) is given
    in the reader's language; a note sales wrote stays as written."""
    if not summary:
        return dict(notes)
    defaults = [
        note_defaults(summary, quantity, kind, i18n.translations_for(loc).gettext)
        for loc in i18n.LOCALES
    ]
    ours = note_defaults(summary, quantity, kind, i18n.gettext)
    out = dict(notes)
    for name, text in notes.items():
        older = {d[name] for d in defaults}
        if name == "note_comm_pattern":
            older.add(str(summary.get("comm_pattern") or "")[:300])
        if text and text in older:
            out[name] = ours[name]
    return out


def quote_input(session: Session, form: QuoteIn) -> QuoteInput:
    """The rules across fields of a validated builder form: terms per kind of SKU, the
    discount, the sizing link (run through the engine). Raises InvalidInput per field."""
    errors: dict[str, str] = {}
    sku_id = form.sku
    kind = kind_of(sku_id)
    quantity = form.quantity
    default_months = pricing.MIN_RACK_MONTHS if kind == QuoteKind.rack else 1
    months = form.months if form.months is not None else default_months
    for k, v in pricing.check_terms(kind, quantity, months).items():
        errors.setdefault(k, v)
    valid_days = form.valid_days if form.valid_days is not None else pricing.DEFAULT_VALID_DAYS
    for name in PRINTED_FIELDS:
        refused = pdfdoc.unprintable(getattr(form, name))
        if refused:
            # the fonts print neither these scripts nor emoji: refused, named, not left blank
            chars = pdfdoc.describe(refused)
            errors.setdefault(name, i18n.gettext(UNPRINTABLE).format(chars=chars))
    raw_sizing = form.sizing
    data = QuoteInput(
        prospect_name=form.prospect_name,
        prospect_email=form.prospect_email,
        prospect_company=form.prospect_company,
        sku_id=sku_id,
        quantity=quantity,
        months=months,
        discount_bp=form.discount_bp,
        valid_days=valid_days,
        sizing_query="",
        sizing_notes=form.sizing_notes,
        notes=form.notes,
        note_model_size=form.note_model_size,
        note_token_budget=form.note_token_budget,
        note_comm_pattern=form.note_comm_pattern,
    )
    query = sizing_query_of(raw_sizing)
    if query and not errors.get("sku") and not errors.get("quantity"):
        try:
            summary, canonical = size_from_query(query, sku_id, quantity)
        except InvalidInput as e:
            errors["sizing"] = e.message
            if e.params:
                errors["sizing"] = e.render_message(lambda s: s)
        else:
            data.sizing_summary = summary
            data.sizing_query = canonical
            # the defaults in the language sales read the builder in; /deploy gives them
            # in its reader's (notes_for_reader)
            defaults = note_defaults(summary, quantity, kind, i18n.gettext)
            data.note_model_size = data.note_model_size or defaults["note_model_size"]
            data.note_token_budget = data.note_token_budget or defaults["note_token_budget"]
            data.note_comm_pattern = data.note_comm_pattern or defaults["note_comm_pattern"]
    elif raw_sizing and not query:
        errors["sizing"] = N_("Paste a link to the sizing page (/size?…) or its query string.")
    if errors:
        raise InvalidInput(errors=errors)
    return data


def find_customer(session: Session, email: str) -> User | None:
    if not email:
        return None
    return session.exec(
        select(User).where(
            func.lower(User.email) == email.lower(), User.role == Role.customer.value
        )
    ).first()


def search_customers(session: Session, text: str, limit: int = 8) -> list[User]:
    t = text.strip().lower()
    if len(t) < 2:
        return []
    like = f"%{t.replace('%', '').replace('_', '')}%"
    return list(
        session.exec(
            select(User)
            .where(User.role == Role.customer.value, func.lower(User.email).like(like))
            .order_by(User.email)
            .limit(limit)
        ).all()
    )


def apply_promise(session: Session, q: Quote, now: datetime) -> None:
    qty = q.quantity if q.kind == QuoteKind.node else max(1, q.quantity // pricing.RACK_GPUS)
    p = catalog.current_promise(session, q.sku_id, qty, now)
    q.promise_available = bool(p.available)
    q.promise_date = p.date if p.available else None
    q.promise_explanation = (p.explanation or "")[:300]
    q.promise_message = (getattr(p, "message", "") or "")[:200]
    params = dict(getattr(p, "params", ()) or ())
    q.promise_params_json = json.dumps(params, default=str, ensure_ascii=False)[:1000]


def apply_input(session: Session, q: Quote, data: QuoteInput, now: datetime) -> None:
    customer = find_customer(session, data.prospect_email)
    q.customer_user_id = customer.id if customer else None
    q.prospect_email = data.prospect_email
    q.prospect_name = data.prospect_name or (customer.name if customer else "")
    q.prospect_company = data.prospect_company or (customer.company if customer else "")
    if q.id is None or q.sku_id != data.sku_id:
        # The list price is read live from the catalog and frozen on the quote.
        q.list_unit_price_cents = int(catalog.list_price_cents(session, data.sku_id))
    q.sku_id = data.sku_id
    q.kind = kind_of(data.sku_id)
    s = spec(data.sku_id)
    q.image_id = s.images[0] if s.images else ""
    q.quantity = data.quantity
    q.months = data.months
    q.discount_bp = data.discount_bp
    t = pricing.totals(q.list_unit_price_cents, q.discount_bp, q.quantity, q.months)
    q.unit_price_cents = t.unit_cents
    q.monthly_total_cents = t.monthly_cents
    q.total_cents = t.total_cents
    q.valid_days = data.valid_days
    q.sizing_query = data.sizing_query
    q.sizing_notes = data.sizing_notes
    q.sizing_summary_json = json.dumps(data.sizing_summary) if data.sizing_summary else ""
    q.note_model_size = data.note_model_size
    q.note_token_budget = data.note_token_budget
    q.note_comm_pattern = data.note_comm_pattern
    q.notes = data.notes
    q.updated_at = now
    apply_promise(session, q, now)
