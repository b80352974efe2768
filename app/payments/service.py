"""Crypto top-ups: create invoices, take provider notifications, expire and credit.

Every change of an invoice goes through ``sync_invoice``: it locks the invoice row,
re-reads the provider's state (the payments seen on chain), derives the status with the
pure ``rules.evaluate`` and, when the invoice becomes final with something to credit,
credits the ledger once (``ledger_entries.credit_invoice_id`` is unique). Notifications
therefore only *trigger* a re-read: redelivered, duplicated or out-of-order events cannot
change the outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, or_, select

from app import errors
from app.clock import utc
from app.db import rows_of_user
from app.errors import N_
from app.ledger import service as ledger
from app.ledger.postings import credit_for_invoice, crypto_due
from app.payments import rules
from app.payments.addresses import deposit_address, payment_uri
from app.payments.models import ChainPayment, Invoice, WalletSecret, WebhookDelivery
from app.payments.rates import CURRENCIES, RateSource, default_source

MIN_CENTS = 100  # US$1
MAX_CENTS = 100_000_000  # US$1,000,000 per invoice
LARGEST = N_("The largest top-up is US$1,000,000.00 per invoice.")
EVENT_TYPES = {
    "InvoiceCreated",
    "InvoiceReceivedPayment",
    "InvoicePaymentSettled",
    "InvoiceProcessing",
    "InvoiceExpired",
    "InvoiceSettled",
    "InvoiceInvalid",
}


class BadSignature(errors.DomainError):
    status_code = 401
    code = "bad_signature"
    default_message = N_("The notification signature is missing or wrong.")


class Provider(Protocol):
    def create(self, session: Session, wanted: rules.InvoiceRequest) -> dict[str, Any]:
        """A new provider invoice: ``provider_id``, ``address``, ``payment_uri``,
        ``due_units`` (int), ``rate`` (US$ per whole coin), ``rate_source``."""
        ...

    def payments(self, session: Session, invoice: Invoice) -> list[rules.Payment]: ...


class SimulatedProvider:
    """Reads the simulated chain (``payments_chain_payments``)."""

    def __init__(self, rates: RateSource | None = None) -> None:
        self.rates = rates

    def create(self, session: Session, wanted: rules.InvoiceRequest) -> dict[str, Any]:
        currency = wanted.currency
        rate = (self.rates or default_source()).quote(currency, wanted.now)
        due = crypto_due(wanted.amount_cents, rate.usd_per_unit, CURRENCIES[currency].decimals)
        provider_id = secrets.token_urlsafe(16).replace("-", "x").replace("_", "y")[:22]
        address = deposit_address(_wallet_secret(session), currency, provider_id)
        return {
            "provider_id": provider_id,
            "address": address,
            "payment_uri": payment_uri(currency, address, due),
            "due_units": due,
            "rate": rate.usd_per_unit,
            "rate_source": rate.source,
        }

    def payments(self, session: Session, invoice: Invoice) -> list[rules.Payment]:
        rows = session.exec(
            select(ChainPayment)
            .where(ChainPayment.invoice_id == invoice.id)
            .order_by(col(ChainPayment.id))
        ).all()
        return [rules.Payment(int(r.units), utc(r.seen_at), r.confirmed) for r in rows]


SIMULATED: Provider = SimulatedProvider()
# The provider of this process, chosen from settings by ``create_app`` and the worker
# (``use_provider(make_provider(settings))``); development and tests keep the simulator.
PROVIDER: Provider = SIMULATED


def make_provider(settings: Any) -> Provider:
    if settings.payment_provider == "btcpay":
        # Imported when chosen: only a process that talks to BTCPay loads httpx (cost).
        from app.payments.btcpay import BTCPayProvider

        return BTCPayProvider(
            url=settings.btcpay_url,
            store_id=settings.btcpay_store_id,
            api_key=settings.btcpay_api_key,
        )
    return SIMULATED


def use_provider(provider: Provider) -> None:
    global PROVIDER
    PROVIDER = provider


def _wallet_secret(session: Session) -> bytes:
    row = session.get(WalletSecret, 1)
    if row is None:
        try:
            with session.begin_nested():
                row = WalletSecret(id=1, seed_hex=secrets.token_hex(32))
                session.add(row)
                session.flush()
        except IntegrityError:
            row = session.get(WalletSecret, 1)
    assert row is not None
    return bytes.fromhex(row.seed_hex)


def _amount_errors(amount_cents: Any, currency: str) -> dict[str, str]:
    errs: dict[str, str] = {}
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool):
        errs["amount"] = N_("Enter an amount in US dollars.")
    elif amount_cents < MIN_CENTS:
        errs["amount"] = N_("The smallest top-up is US$1.00.")
    elif amount_cents > MAX_CENTS:
        errs["amount"] = LARGEST
    if currency not in CURRENCIES:
        errs["currency"] = N_("Choose BTC, ETH, USDT or USDC.")
    return errs


def create_topup(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    currency: str,
    now: datetime,
    return_to: str | None = None,
    rates: RateSource | None = None,
    provider: Provider | None = None,
) -> Invoice:
    """A new invoice for ``amount_cents`` in ``currency`` at a rate locked for 15 minutes."""
    errs = _amount_errors(amount_cents, currency)
    if errs:
        raise errors.InvalidInput(next(iter(errs.values())), field=next(iter(errs)), errors=errs)
    if provider is None:
        provider = SimulatedProvider(rates) if rates is not None else PROVIDER
    made = provider.create(
        session, rules.InvoiceRequest(amount_cents, currency, now, reference=f"user-{user_id}")
    )
    inv = Invoice(
        provider_id=made["provider_id"],
        user_id=user_id,
        amount_cents=amount_cents,
        currency=currency,
        decimals=CURRENCIES[currency].decimals,
        rate=made["rate"],
        rate_source=made["rate_source"],
        due_units=str(made["due_units"]),
        address=made["address"],
        payment_uri=made["payment_uri"],
        return_to=(return_to or "") if rules.is_same_site_path(return_to) else "",
        created_at=now,
        expires_at=now + rules.RATE_LOCK,
        monitoring_until=now + rules.RATE_LOCK + rules.MONITORING_WINDOW,
        updated_at=now,
    )
    session.add(inv)
    session.flush()
    return inv


def invoice_visible_to(session: Session, user: Any, invoice_id: int) -> Invoice:
    """The invoice if ``user`` may see it (its customer, or staff); otherwise 404."""
    inv = session.get(Invoice, invoice_id)
    if inv is None or user is None or (inv.user_id != user.id and not user.is_staff):
        raise errors.NotFound(N_("No such invoice."))
    return inv


def invoices_for(session: Session, user_id: int, limit: int = 20) -> list[Invoice]:
    return rows_of_user(session, Invoice, user_id, limit=limit)


def _lock(session: Session, invoice_id: int) -> Invoice:
    inv = session.exec(
        select(Invoice)
        .where(Invoice.id == invoice_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()
    if inv is None:
        raise errors.NotFound(N_("No such invoice."))
    return inv


def sync_invoice(
    session: Session, invoice_id: int, now: datetime, *, provider: Provider | None = None
) -> Invoice:
    """Re-read the provider and bring the invoice (and its credit) up to date."""
    return _sync(session, invoice_id, now, provider)[0]


def _sync(
    session: Session, invoice_id: int, now: datetime, provider: Provider | None = None
) -> tuple[Invoice, bool]:
    """As ``sync_invoice``; also says whether *this* call credited the ledger."""
    inv = _lock(session, invoice_id)
    pays = (provider or PROVIDER).payments(session, inv)
    if inv.final:
        counted = int(inv.received_units)
        if sum(p.units for p in pays) != counted and not inv.needs_review:
            inv.needs_review = True  # money arrived after the invoice was closed
            inv.updated_at = now
            session.add(inv)
            session.flush()
        return inv, False
    ev = rules.evaluate(
        due_units=int(inv.due_units),
        payments=pays,
        expires_at=utc(inv.expires_at),
        monitoring_until=utc(inv.monitoring_until),
        now=now,
    )
    inv.status = ev.status.value
    inv.exception_status = ev.exception.value
    inv.received_units = str(ev.received_units)
    inv.needs_review = inv.needs_review or ev.needs_review
    inv.updated_at = now
    credited_now = False
    if ev.final:
        inv.final = True
        cents = credit_for_invoice(
            amount_cents=inv.amount_cents,
            due_units=int(inv.due_units),
            received_units=ev.credit_units,
            rate=inv.rate,
            decimals=inv.decimals,
        )
        inv.credited_cents = cents
        if ev.status is rules.Status.settled:
            inv.settled_at = now
        if cents > 0:
            entry = ledger.credit_topup(
                session,
                user_id=inv.user_id,
                amount_cents=cents,
                invoice_id=inv.id,  # type: ignore[arg-type]
                now=now,
                crypto_amount=ev.credit_units,
                currency=inv.currency,
                rate=inv.rate,
                reason=f"{inv.currency} top-up {ev.status.value}"
                + (f" ({ev.exception.value})" if ev.exception.value else ""),
            )
            inv.credit_entry_id = entry.id
            credited_now = True
    session.add(inv)
    session.flush()
    return inv, credited_now


def expire_due(session: Session, now: datetime, *, provider: Provider | None = None) -> int:
    """Worker: re-derive open invoices whose rate lock or monitoring window has passed.

    An open invoice already flagged for review (paid in full, unconfirmed when its window
    closed) is left to staff and to provider notifications: not re-read every cycle (with
    BTCPay each re-read is a call to the provider)."""
    ids = session.exec(
        select(Invoice.id).where(
            col(Invoice.final).is_(False),
            or_(
                (col(Invoice.status) == rules.Status.new.value) & (col(Invoice.expires_at) <= now),
                (col(Invoice.monitoring_until) <= now) & col(Invoice.needs_review).is_(False),
            ),
        )
    ).all()
    changed = 0
    for invoice_id in ids:
        before = session.get(Invoice, invoice_id)
        status = (before.status, before.final) if before else None
        inv = sync_invoice(session, invoice_id, now, provider=provider)  # type: ignore[arg-type]
        changed += (inv.status, inv.final) != status
    return changed


# --- webhook ------------------------------------------------------------------------------


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(body: bytes, header: str | None, secret: str) -> bool:
    if not header or not secret:
        return False
    return hmac.compare_digest(sign(body, secret), header.strip())


def handle_webhook(
    session: Session,
    body: bytes,
    signature: str | None,
    *,
    secret: str,
    now: datetime,
    provider: Provider | None = None,
) -> dict[str, Any]:
    """The one code path for provider notifications (the endpoint and the simulator)."""
    if not verify_signature(body, signature, secret):
        raise BadSignature()
    try:
        event = json.loads(body)
        etype = str(event["type"])
        provider_id = str(event["invoiceId"])
        delivery_id = str(event.get("deliveryId") or "")
    except (ValueError, KeyError, TypeError):
        raise errors.InvalidInput(N_("The notification could not be read.")) from None
    if etype not in EVENT_TYPES or not delivery_id:
        raise errors.InvalidInput(N_("The notification could not be read."))
    inv = session.exec(select(Invoice).where(Invoice.provider_id == provider_id)).first()
    if inv is None:
        raise errors.NotFound(N_("No such invoice."))
    duplicate = False
    try:
        with session.begin_nested():
            session.add(
                WebhookDelivery(
                    delivery_id=delivery_id[:64],
                    original_delivery_id=str(event.get("originalDeliveryId") or delivery_id)[:64],
                    event_type=etype,
                    provider_invoice_id=provider_id,
                    received_at=now,
                    is_redelivery=bool(event.get("isRedelivery")),
                )
            )
            session.flush()
    except IntegrityError:
        duplicate = True  # the same delivery again: re-reading is harmless
    inv, credited_now = _sync(session, inv.id, now, provider)  # type: ignore[arg-type]
    return {
        "invoice": inv.provider_id,
        "status": inv.status,
        "exception": inv.exception_status,
        "credited": credited_now,
        "duplicate": duplicate,
    }


def event_body(
    invoice: Invoice,
    etype: str,
    now: datetime,
    *,
    delivery_id: str | None = None,
    original: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """A notification body as the provider sends it (BTCPay Greenfield shape)."""
    did = delivery_id or secrets.token_hex(12)
    payload = {
        "deliveryId": did,
        "webhookId": "sim-webhook",
        "originalDeliveryId": original or did,
        "isRedelivery": original is not None,
        "type": etype,
        "timestamp": int(now.timestamp()),
        "storeId": "sim-store",
        "invoiceId": invoice.provider_id,
        **(extra or {}),
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def record_chain_payment(
    session: Session, invoice: Invoice, units: int, *, now: datetime, confirmed: bool
) -> ChainPayment:
    """Simulated provider side: a transaction to the invoice's address is seen."""
    if units <= 0:
        raise errors.InvalidInput(N_("The amount must be more than zero."))
    pay = ChainPayment(
        invoice_id=invoice.id,  # type: ignore[arg-type]
        txid=secrets.token_hex(32),
        units=str(units),
        seen_at=now,
        confirmed=confirmed,
    )
    session.add(pay)
    session.flush()
    return pay


def confirm_chain_payments(session: Session, invoice: Invoice) -> int:
    rows = session.exec(
        select(ChainPayment).where(
            ChainPayment.invoice_id == invoice.id, col(ChainPayment.confirmed).is_(False)
        )
    ).all()
    for r in rows:
        r.confirmed = True
        session.add(r)
    session.flush()
    return len(rows)


def review_queue(session: Session, limit: int = 100) -> list[Invoice]:
    return list(
        session.exec(
            select(Invoice)
            .where(col(Invoice.needs_review).is_(True))
            .order_by(col(Invoice.id).desc())
            .limit(limit)
        )
    )


def recent_invoices(session: Session, limit: int = 50, offset: int = 0) -> list[Invoice]:
    return list(
        session.exec(select(Invoice).order_by(col(Invoice.id).desc()).limit(limit).offset(offset))
    )


def provider_log(
    session: Session, invoice: Invoice
) -> tuple[list[ChainPayment], list[WebhookDelivery]]:
    """Staff: the payments the provider saw and every notification we accepted."""
    pays = session.exec(
        select(ChainPayment)
        .where(ChainPayment.invoice_id == invoice.id)
        .order_by(col(ChainPayment.id))
    ).all()
    deliveries = session.exec(
        select(WebhookDelivery)
        .where(WebhookDelivery.provider_invoice_id == invoice.provider_id)
        .order_by(col(WebhookDelivery.id))
    ).all()
    return list(pays), list(deliveries)


def invoice_credit_problems(session: Session) -> tuple[list[str], list[str]]:
    """Top-up credits that do not match their invoice (customer, amount, the invoice's
    record of the entry), and invoices marked credited without their ledger entry."""
    credits = ledger.topup_credits(session)
    invoices = {i.id: i for i in session.exec(select(Invoice)).all()}
    mismatched = []
    for c in credits:
        inv = invoices.get(c.invoice_id) if c.invoice_id is not None else None
        if (
            inv is None
            or inv.credited_cents is None
            or inv.credited_cents != c.amount_cents
            or inv.user_id != c.user_id
            or inv.credit_entry_id != c.entry_id
        ):
            mismatched.append(f"{c.entry_id}, {c.amount_cents}, {inv and inv.credited_cents}")
    credited = {c.invoice_id for c in credits}
    missing = [
        f"{i.id}, {i.credited_cents}, {i.credit_entry_id}"
        for i in invoices.values()
        if i.credit_entry_id is not None and i.id not in credited
    ]
    return mismatched, missing
