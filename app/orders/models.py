"""Orders, their hosts (hand-over details), timeline events and renewal charges."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import Column, Date, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime
from app.orders.lifecycle import OrderStatus


class Order(SQLModel, table=True):
    __tablename__ = "orders"
    __table_args__ = (UniqueConstraint("user_id", "idempotency_key", name="uq_orders_user_idem"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    # The form carries a key from the page; a resubmitted form finds the same order.
    idempotency_key: str = Field(max_length=80)
    # SHA-256 of the normalised request: same key + same body → same order; else 409.
    request_hash: str = Field(default="", max_length=64)
    status: str = Field(default=OrderStatus.awaiting_payment.value, max_length=24, index=True)

    sku_id: str = Field(max_length=32, index=True)
    quantity: int = Field(ge=1)
    image_id: str = Field(max_length=40)
    # Snapshot of the SSH public keys at order time: JSON list of {name, public_key, fingerprint}.
    ssh_keys_json: str = Field(default="[]", sa_column=Column(Text, nullable=False))

    # Structured notes for the engineers.
    note_model_size: str = Field(default="", max_length=80)
    note_token_budget: str = Field(default="", max_length=80)
    note_node_count: int | None = None
    note_private_network: bool = False
    note_comm_pattern: str = Field(default="", max_length=300)
    note_free_text: str = Field(
        default="", sa_column=Column(Text, nullable=False, server_default="")
    )
    sizing_query: str = Field(default="", max_length=2000)  # the /size query string it came from

    # Money (integer cents), frozen when the order is created/paid.
    unit_price_cents: int  # per node per month
    monthly_total_cents: int
    quote_id: int | None = Field(default=None, index=True)
    quote_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    first_hold_id: int | None = None
    pay_attempts: int = 0

    # The delivery promise, frozen when paid (in the same transaction as the node hold).
    promised_date: date | None = Field(
        default=None, sa_column=Column(Date, nullable=True, index=True)
    )
    promise_explanation: str = Field(default="", max_length=300)
    delay_reason: str = Field(default="", max_length=500)
    end_reason: str = Field(default="", max_length=300)  # ops ended the lease early: why
    delay_estimate: date | None = Field(default=None, sa_column=Column(Date, nullable=True))

    created_at: datetime = Field(sa_type=UTCDateTime, index=True)
    paid_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    acknowledged_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    provisioning_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    cancelled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    wiped_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    # The lease's billing period (set at delivery; advanced by each renewal).
    period_start: datetime | None = Field(default=None, sa_type=UTCDateTime)
    period_end: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    periods_paid: int = 0
    cancel_at_period_end: bool = False
    grace_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # The private network between the order's nodes (multi-node orders), set by ops:
    # "" (none asked) | requested | configuring | ready, with its subnet once ready.
    network_status: str = Field(default="", max_length=16)
    network_subnet: str = Field(default="", max_length=43)
    # The one "your order is late" notice (sent by the worker once per order).
    late_notified_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class OrderHost(SQLModel, table=True):
    """Hand-over details of one node of an order, entered by ops."""

    __tablename__ = "order_hosts"
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id", index=True)
    node_id: int | None = Field(default=None, index=True)
    hostname: str = Field(default="", max_length=120)
    ip: str = Field(max_length=64)
    ssh_user: str = Field(default="ubuntu", max_length=64)
    ssh_port: int = 22
    # One fingerprint per line, as `ssh-keygen -lf` prints them.
    host_key_fingerprints: str = Field(
        default="", sa_column=Column(Text, nullable=False, server_default="")
    )


class OrderEvent(SQLModel, table=True):
    """The order's timeline, shown to the customer (and to staff with the actor)."""

    __tablename__ = "order_events"
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id", index=True)
    at: datetime = Field(sa_type=UTCDateTime)
    kind: str = Field(max_length=40)
    message: str = Field(default="", max_length=1000)  # as written (rows before msgid)
    # The message as a code: the English msgid and JSON parameters (app/notifications/
    # messages.py), rendered in the reader's language.
    msgid: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    params: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    actor_id: int | None = Field(default=None)
    customer_visible: bool = True


class RenewalCharge(SQLModel, table=True):
    """One row per order and period: the unique constraint makes each period charge once,
    however many workers run."""

    __tablename__ = "renewal_charges"
    __table_args__ = (UniqueConstraint("order_id", "period_index", name="uq_renewal_order_period"),)
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id", index=True)
    period_index: int  # 1 = the first renewal (second month)
    attempted_at: datetime = Field(sa_type=UTCDateTime)
    status: str = Field(
        default="pending", sa_column=Column(String(16), nullable=False)
    )  # paid | short
    amount_cents: int
    ledger_entry_id: int | None = None


class OrderTask(SQLModel, table=True):
    """Something the customer asked ops to do on a running order: add or replace an SSH key,
    reboot, reinstall (with an image) or boot into rescue. requested → in_progress → done |
    failed. Every change is audited and appears on the order's timeline."""

    __tablename__ = "order_tasks"
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id", index=True)
    requested_by: int = Field(foreign_key="users.id")
    kind: str = Field(max_length=16)  # ssh_key | reboot | reinstall | rescue
    host_id: int | None = Field(default=None)  # one node; None = every node of the order
    params_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    status: str = Field(default="requested", max_length=16, index=True)
    customer_note: str = Field(default="", max_length=500)
    ops_note: str = Field(default="", max_length=500)  # shown to the customer
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    done_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    acted_by: int | None = Field(default=None, foreign_key="users.id")


class RenewalReminder(SQLModel, table=True):
    """A reminder that the balance will not cover a renewal, one row per order, period and
    reminder (7, 3 or 1 day(s) before): the unique constraint sends each exactly once,
    however many workers run. The notice is written in the same transaction as the row."""

    __tablename__ = "renewal_reminders"
    __table_args__ = (
        UniqueConstraint("order_id", "period_index", "days_before", name="uq_renewal_reminder"),
    )
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id", index=True)
    period_index: int  # the renewal it warns about (1 = the first renewal)
    days_before: int  # 7, 3 or 1
    shortfall_cents: int
    sent_at: datetime = Field(sa_type=UTCDateTime)
