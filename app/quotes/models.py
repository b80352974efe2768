"""Sales quotes.

The share token is stored as is (not only its hash): a sales person must be able to
copy the link again from the quote page. It is 32 characters of ``secrets.token_urlsafe``
(192 bits), looked up by a unique index, never logged or put in the audit log, and it dies
with the quote (withdrawn or expired). Anyone who can read this table can already read
the quote itself, so a hash would protect nothing worth the inconvenience.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import BigInteger, Column, Date, String, Text
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime


class Quote(SQLModel, table=True):
    __tablename__ = "quotes"

    id: int | None = Field(default=None, primary_key=True)
    token: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    status: str = Field(default="draft", max_length=24, index=True)
    kind: str = Field(default="node", max_length=8)  # node | rack (GB300 NVL72 term)

    created_by_id: int = Field(foreign_key="users.id", index=True)
    customer_user_id: int | None = Field(default=None, foreign_key="users.id", index=True)
    prospect_name: str = Field(default="", max_length=120)
    prospect_email: str = Field(default="", max_length=254, index=True)
    prospect_company: str = Field(default="", max_length=120, index=True)

    sku_id: str = Field(max_length=32)
    quantity: int  # nodes, or GPUs for a rack term
    months: int
    image_id: str = Field(default="", max_length=40)

    # Money, integer cents. The list price is read live from the catalog at creation and
    # frozen here; the unit is per node per month (node) or per GPU per month (rack).
    # BIGINT: a 16-rack, 36-month GB300 term is ~US$330M, beyond a 32-bit int of cents.
    list_unit_price_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    discount_bp: int = 0
    unit_price_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    monthly_total_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    total_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    currency: str = Field(default="USD", max_length=3)

    # Sizing inputs: the /size query string and/or pasted notes, and what the engine said.
    sizing_query: str = Field(default="", max_length=2000)
    sizing_notes: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    sizing_summary_json: str = Field(
        default="", sa_column=Column(Text, nullable=False, server_default="")
    )
    note_model_size: str = Field(default="", max_length=80)
    note_token_budget: str = Field(default="", max_length=80)
    note_comm_pattern: str = Field(default="", max_length=300)
    notes: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))

    # The delivery estimate when the quote was built: an estimate, never a reservation.
    promise_date: date | None = Field(default=None, sa_column=Column(Date, nullable=True))
    promise_explanation: str = Field(default="", max_length=300)
    promise_available: bool = True
    # The promise's msgid and its parameters, so the page shows it in the reader's language.
    promise_message: str = Field(default="", max_length=200)
    promise_params_json: str = Field(default="{}", max_length=1000)

    valid_days: int = 7
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    viewed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    accepted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    expired_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    withdrawn_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    # Discount approval (above the sales limit): who, when, why.
    approval_requested_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    approved_by_id: int | None = Field(default=None, foreign_key="users.id")
    approved_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    approval_reason: str = Field(default="", max_length=500)
    approved_discount_bp: int | None = None

    # Set by checkout when an order is created from this quote.
    used_order_id: int | None = Field(default=None, index=True)
    used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ClusterRequestStatus(StrEnum):
    new = "new"
    contacted = "contacted"
    quoted = "quoted"
    closed = "closed"


class ClusterRequest(SQLModel, table=True):
    """A "talk to sales" request for any SKU, node count and term (a sales conversation).

    Sent from /cluster-request (linked from /size, /deploy above the self-serve limit and
    the GB300 page); listed in the sales queue; its status changes only through
    ``app.quotes.service``. ``sizing_query`` is the /size query string it came from.
    """

    __tablename__ = "quotes_cluster_requests"
    id: int | None = Field(default=None, primary_key=True)
    sku_id: str = Field(max_length=32)
    nodes: int = Field(ge=1)
    months: int = Field(ge=1, le=36)
    start_date: date = Field(sa_column=Column(Date, nullable=False))
    workload: str = Field(sa_column=Column(Text, nullable=False))
    name: str = Field(default="", max_length=120)
    email: str = Field(max_length=254)
    company: str = Field(default="", max_length=120)
    sizing_query: str = Field(default="", max_length=2000)
    user_id: int | None = Field(default=None, foreign_key="users.id", index=True)
    status: str = Field(default=ClusterRequestStatus.new.value, max_length=16, index=True)
    staff_note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)
