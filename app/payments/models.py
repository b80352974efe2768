"""Top-up invoices, the simulated chain's payments, webhook deliveries, the wallet secret."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, String
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime


class Invoice(SQLModel, table=True):
    """Our view of a provider invoice, re-derived from the provider on every notification."""

    __tablename__ = "payments_invoices"
    id: int | None = Field(default=None, primary_key=True)
    # The provider's id (what BTCPay calls invoiceId), used in webhooks and URIs.
    provider_id: str = Field(sa_column=Column(String(32), unique=True, nullable=False))
    user_id: int = Field(foreign_key="users.id", index=True)
    amount_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    currency: str = Field(max_length=8)
    decimals: int
    rate: str = Field(max_length=40)  # US$ per whole coin, locked for 15 minutes
    rate_source: str = Field(default="simulated", max_length=32)
    due_units: str = Field(max_length=40)  # integer in the smallest unit (wei need > 64 bits)
    address: str = Field(max_length=100)
    payment_uri: str = Field(max_length=300)
    status: str = Field(default="New", max_length=16, index=True)
    exception_status: str = Field(default="", max_length=16)
    received_units: str = Field(default="0", max_length=40)
    final: bool = Field(default=False, index=True)
    needs_review: bool = Field(default=False, index=True)
    credited_cents: int | None = Field(default=None, sa_column=Column(BigInteger))
    credit_entry_id: int | None = Field(default=None)
    return_to: str = Field(default="", max_length=500)
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
    monitoring_until: datetime = Field(sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    settled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ChainPayment(SQLModel, table=True):
    """The simulated provider's truth: a transaction seen paying an invoice's address."""

    __tablename__ = "payments_chain_payments"
    id: int | None = Field(default=None, primary_key=True)
    invoice_id: int = Field(foreign_key="payments_invoices.id", index=True)
    txid: str = Field(sa_column=Column(String(80), unique=True, nullable=False))
    units: str = Field(max_length=40)
    seen_at: datetime = Field(sa_type=UTCDateTime)
    confirmed: bool = False


class WebhookDelivery(SQLModel, table=True):
    """Every accepted notification (redeliveries share ``original_delivery_id``)."""

    __tablename__ = "payments_webhook_deliveries"
    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    original_delivery_id: str = Field(default="", max_length=64, index=True)
    event_type: str = Field(max_length=40)
    provider_invoice_id: str = Field(max_length=32, index=True)
    received_at: datetime = Field(sa_type=UTCDateTime)
    is_redelivery: bool = False
    outcome: str = Field(default="", max_length=200)


class WalletSecret(SQLModel, table=True):
    """The simulated wallet's seed: deposit addresses derive from it and the invoice id."""

    __tablename__ = "payments_wallet"
    id: int = Field(default=1, primary_key=True)
    seed_hex: str = Field(max_length=128)
