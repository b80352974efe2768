"""The only place that reads the wall clock.

``SystemClock`` is real UTC time. ``SimulatedClock`` adds an offset kept in the database
(table ``sim_clock``), so every process — app workers, the background worker, the
simulator — agrees on "now" and staff can move time forward in simulation mode.
"""

from __future__ import annotations

import time as _time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, select

from app.db import read_value


class Clock(Protocol):
    def now(self) -> datetime: ...


def wall_now() -> datetime:
    return datetime.now(UTC)


def monotonic() -> float:
    """Seconds from a monotonic clock, for measuring durations (metrics, throttles)."""
    return _time.monotonic()


class SimClockRow(SQLModel, table=True):
    __tablename__ = "sim_clock"
    id: int = Field(default=1, primary_key=True)
    offset_seconds: int = 0


class SystemClock:
    def now(self) -> datetime:
        return wall_now()


class FixedClock:
    """A clock that stands still until told to move (tests, pure simulations)."""

    def __init__(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("FixedClock needs an aware datetime")
        self._at = at

    def now(self) -> datetime:
        return self._at

    def advance(self, delta: timedelta) -> None:
        self._at = self._at + delta

    def set(self, at: datetime) -> None:
        self._at = at


class SimulatedClock:
    """Wall time plus a database-stored offset shared by every process.

    The offset is re-read at most every ``ttl`` seconds (default 1 s), so a request does
    not pay a database round trip per ``now()``; a move made by staff in one process is
    seen by every other process within that time.
    """

    def __init__(self, engine: Engine, ttl: float = 1.0) -> None:
        self.engine = engine
        self.ttl = ttl
        self._cached: tuple[float, timedelta] | None = None

    def offset(self) -> timedelta:
        cached = self._cached
        if cached is not None and monotonic() - cached[0] < self.ttl:
            return cached[1]
        value = timedelta(seconds=self._read_offset_seconds())
        self._cached = (monotonic(), value)
        return value

    def _read_offset_seconds(self) -> int:
        # A bare read outside any ORM session (see app.db.read_value): it never waits for
        # the request's own write transaction on SQLite.
        try:
            value = read_value(self.engine, "SELECT offset_seconds FROM sim_clock WHERE id = 1")
        except Exception:  # noqa: BLE001 - no table yet (before migrations): no offset
            return 0
        return int(value or 0)

    def now(self) -> datetime:
        return wall_now() + self.offset()

    def advance(self, session: Session, delta: timedelta) -> timedelta:
        """Move simulated time forward (never backwards) inside the caller's transaction."""
        if delta < timedelta(0):
            raise ValueError("the simulated clock only moves forward")
        row = session.exec(select(SimClockRow).where(SimClockRow.id == 1)).first()
        if row is None:
            row = SimClockRow(id=1, offset_seconds=0)
            session.add(row)
        row.offset_seconds += int(delta.total_seconds())
        session.add(row)
        session.flush()
        self._cached = None
        return timedelta(seconds=row.offset_seconds)


def utc(dt: datetime) -> datetime:
    """Treat a naive datetime read back from SQLite as UTC; convert aware ones to UTC."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
