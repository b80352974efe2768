"""Stock (physical nodes, incoming batches, per-SKU settings) and list prices."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import Column, Date, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime
from app.errors import N_


class NodeState(StrEnum):
    available = "available"
    held = "held"  # paid order waiting for provisioning
    provisioning = "provisioning"
    leased = "leased"
    wiping = "wiping"
    maintenance = "maintenance"


NODE_STATE_LABELS = {
    NodeState.available: N_("available"),
    NodeState.held: N_("held for an order"),
    NodeState.provisioning: N_("provisioning"),
    NodeState.leased: N_("leased"),
    NodeState.wiping: N_("wiping"),
    NodeState.maintenance: N_("maintenance"),
}


# Words inside catalog.json's link and network values; the pages pass those values through
# gettext, so a value listed here is shown translated (the others are product names and
# numbers, the same in every language).
SPEC_VALUE_TEXT = (
    N_("NVLink 5 (130 TB/s per rack)"),
    N_("800G per GPU"),
)


class BatchStatus(StrEnum):
    expected = "expected"
    arrived = "arrived"
    cancelled = "cancelled"


class SkuStock(SQLModel, table=True):
    """One row per self-serve SKU: the provisioning lead time, and the row that
    ``reserve_for_order`` locks (``SELECT … FOR UPDATE``) so reservations of one SKU
    are serialised on PostgreSQL."""

    __tablename__ = "catalog_sku_stock"
    sku_id: str = Field(primary_key=True, max_length=32)
    lead_time_business_days: int = Field(default=2, ge=0)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class Node(SQLModel, table=True):
    __tablename__ = "catalog_nodes"
    id: int | None = Field(default=None, primary_key=True)
    sku_id: str = Field(max_length=32, index=True)
    hostname: str = Field(max_length=80, unique=True)
    state: str = Field(default=NodeState.available.value, max_length=16, index=True)
    mgmt_ip: str = Field(default="", max_length=64)
    order_id: int | None = Field(default=None, foreign_key="orders.id", index=True)
    batch_id: int | None = Field(default=None, index=True)
    note: str = Field(default="", max_length=300)
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class IncomingBatch(SQLModel, table=True):
    __tablename__ = "catalog_batches"
    id: int | None = Field(default=None, primary_key=True)
    sku_id: str = Field(max_length=32, index=True)
    quantity: int = Field(ge=1)
    reserved: int = Field(default=0, ge=0)  # units promised to orders
    expected_on: date = Field(sa_column=Column(Date, nullable=False, index=True))
    status: str = Field(default=BatchStatus.expected.value, max_length=16, index=True)
    note: str = Field(default="", max_length=300)
    created_at: datetime = Field(sa_type=UTCDateTime)
    arrived_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    @property
    def free(self) -> int:
        return max(0, self.quantity - self.reserved) if self.status == "expected" else 0


class StockReservation(SQLModel, table=True):
    """The promise frozen for an order, and what it holds (nodes and batch units)."""

    __tablename__ = "catalog_reservations"
    __table_args__ = (UniqueConstraint("order_id", name="uq_catalog_reservations_order_id"),)
    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="orders.id")
    sku_id: str = Field(max_length=32, index=True)
    quantity: int
    from_stock: int = 0
    # JSON list of [batch_id, units] still waiting for their batch.
    batch_units_json: str = Field(default="[]", sa_column=Column(Text, nullable=False))
    promised_date: date = Field(sa_column=Column(Date, nullable=False))
    ready_at: datetime = Field(sa_type=UTCDateTime)
    in_stock: bool = False
    explanation: str = Field(default="", max_length=300)
    message: str = Field(default="", max_length=200)
    params_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_type=UTCDateTime)
    released_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ListPrice(SQLModel, table=True):
    """The live list price per SKU (cents per node per month; per GPU for racks)."""

    __tablename__ = "catalog_list_prices"
    sku_id: str = Field(primary_key=True, max_length=32)
    cents: int = Field(ge=0)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    updated_by_id: int | None = Field(default=None, foreign_key="users.id")


class PriceVersion(SQLModel, table=True):
    """One row whose ``version`` goes up in the same transaction as any list-price change.

    Each app process caches the list prices keyed by this number, so a change made through
    any process is seen by every other one on its next request (one indexed read)."""

    __tablename__ = "catalog_price_version"
    id: int = Field(default=1, primary_key=True)
    version: int = Field(default=0)


class PriceChange(SQLModel, table=True):
    """History of list-price changes: who, when, old → new, why."""

    __tablename__ = "catalog_price_changes"
    id: int | None = Field(default=None, primary_key=True)
    sku_id: str = Field(max_length=32, index=True)
    old_cents: int
    new_cents: int
    reason: str = Field(max_length=300)
    actor_id: int | None = Field(default=None, foreign_key="users.id")
    actor_email: str = Field(default="", max_length=254)
    at: datetime = Field(sa_type=UTCDateTime, index=True)
