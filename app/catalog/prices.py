"""Catalog list prices: the live price per SKU, its history, and the version every
process's price cache checks (a change bumps it in the same transaction)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.accounts import audit
from app.catalog.models import (
    ListPrice,
    PriceChange,
    PriceVersion,
)
from app.catalog.specs import NodeSpec, all_specs, spec
from app.db import read_value, reader
from app.errors import N_, InvalidInput, NotFound

MAX_PRICE_CENTS = 100_000_000  # US$1,000,000 a month: anything above is a typo


class UnknownSku(NotFound):
    code = "unknown_sku"
    default_message = N_("There is no node called {sku}.")


def get_spec(sku_id: str) -> NodeSpec:
    try:
        return spec(sku_id)
    except KeyError:
        raise UnknownSku(sku=sku_id) from None


def list_price_cents(session: Session, sku_id: str) -> int:
    """The live list price (per node per month; per GPU for rack offers)."""
    row = session.get(ListPrice, sku_id)
    if row is not None:
        return row.cents
    return get_spec(sku_id).list_price_cents_month


def list_prices(session: Session) -> dict[str, int]:
    rows = {r.sku_id: r.cents for r in session.exec(select(ListPrice)).all()}
    return {s.id: rows.get(s.id, s.list_price_cents_month) for s in all_specs()}


def price_version(session: Session) -> int:
    """The list prices' version (0 before the first change); one primary-key read."""
    v = session.exec(select(PriceVersion.version).where(PriceVersion.id == 1)).first()
    return int(v or 0)


def bump_price_version(session: Session) -> None:
    """Call in the transaction that changes a list price: every process's cache of the
    prices is stale from its commit on."""
    done = session.exec(  # type: ignore[call-overload]
        update(PriceVersion)
        .where(col(PriceVersion.id) == 1)
        .values(version=PriceVersion.version + 1)
        .execution_options(synchronize_session=False)
    )
    if done.rowcount:
        return
    try:
        with session.begin_nested():
            session.add(PriceVersion(id=1, version=1))
            session.flush()
    except IntegrityError:  # created by a concurrent change: bump that one
        bump_price_version(session)


def price_cache_of(holder: Any) -> PriceCache:
    """The PriceCache kept on ``holder`` (an app's ``state``), made on first use."""
    cache = getattr(holder, "price_cache", None)
    if cache is None:
        cache = holder.price_cache = PriceCache()
    return cache  # type: ignore[no-any-return]


def price_version_now(engine: Engine) -> int:
    """The price version read on a pooled connection outside any ORM transaction: on
    SQLite a plain autocommit SELECT (no ``BEGIN IMMEDIATE``, so no write lock), on
    PostgreSQL one statement rolled back when the connection goes back to the pool."""
    return int(read_value(engine, "SELECT version FROM catalog_price_version WHERE id = 1") or 0)


class PriceCache:
    """List prices of one app process, valid for one price version.

    ``get`` reads the version first and the prices only when it moved, so a price change
    committed by any process is seen on the next request of every process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._prices: Mapping[str, int] = MappingProxyType({})
        self.reads = 0  # how often the prices themselves were read (for tests and benchmarks)

    def get(self, engine: Engine, version: int | None = None) -> Mapping[str, int]:
        """The prices at the current version, or at ``version`` when the caller read it
        already (the live fragment's cache key): then it is not read again, and prices kept
        for a later version than that are answered as they are."""
        # the version before the prices: a change in between re-reads later
        v = price_version_now(engine) if version is None else version
        with self._lock:
            if v == self._version:
                return self._prices
            if version is not None and self._version is not None and v < self._version:
                return self._prices  # newer than asked for: never older than the key
        with Session(reader(engine)) as session:  # deferred on SQLite: never waits for a writer
            prices = MappingProxyType(list_prices(session))
        with self._lock:
            self._version, self._prices = v, prices
            self.reads += 1
        return prices


def set_list_price(
    session: Session,
    *,
    sku_id: str,
    cents: int,
    reason: str,
    actor: Any,
    now: datetime,
    ip: str = "",
) -> PriceChange | None:
    """Change the list price for new orders and quotes (existing orders keep theirs)."""
    get_spec(sku_id)
    reason = reason.strip()
    errors = {}
    if cents <= 0 or cents > MAX_PRICE_CENTS:
        errors["cents"] = N_("Enter a price between US$0.01 and US$1,000,000.")
    if not reason:
        errors["reason"] = N_("Say why the price changes; it is kept in the history.")
    elif len(reason) > 300:
        errors["reason"] = N_("Keep the reason under 300 characters.")
    if errors:
        raise InvalidInput(errors=errors)
    old = list_price_cents(session, sku_id)
    if old == cents:
        return None
    row = session.get(ListPrice, sku_id)
    if row is None:
        row = ListPrice(sku_id=sku_id, cents=cents, updated_at=now)
    row.cents = cents
    row.updated_at = now
    row.updated_by_id = getattr(actor, "id", None)
    session.add(row)
    change = PriceChange(
        sku_id=sku_id,
        old_cents=old,
        new_cents=cents,
        reason=reason,
        actor_id=getattr(actor, "id", None),
        actor_email=getattr(actor, "email", "") or "",
        at=now,
    )
    session.add(change)
    bump_price_version(session)
    audit.record(
        session,
        "catalog.price_changed",
        now,
        actor=actor,
        target=f"sku:{sku_id}",
        ip=ip,
        old_cents=old,
        new_cents=cents,
        reason=reason,
    )
    session.flush()
    return change


def price_history(
    session: Session, sku_id: str | None = None, limit: int = 50
) -> list[PriceChange]:
    q = select(PriceChange).order_by(col(PriceChange.at).desc(), col(PriceChange.id).desc())
    if sku_id:
        q = q.where(PriceChange.sku_id == sku_id)
    return list(session.exec(q.limit(limit)).all())
