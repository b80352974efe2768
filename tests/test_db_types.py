"""The one timestamp column type: every timestamp reads back as an aware UTC datetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import DateTime
from sqlmodel import Session, select

from app.db import UTCDateTime, make_engine, metadata
from app.notifications.models import OutboxEmail


def test_every_timestamp_column_is_utc_datetime() -> None:
    from app.tables import import_models

    import_models()
    columns = [c for t in metadata.sorted_tables for c in t.columns]
    assert sum(isinstance(c.type, UTCDateTime) for c in columns) > 50
    bare = [f"{c.table.name}.{c.name}" for c in columns if isinstance(c.type, DateTime)]
    assert not bare, f"use Field(sa_type=UTCDateTime) for {bare}"


def test_timestamps_round_trip_as_aware_utc(db_url: str) -> None:
    beijing = timezone(timedelta(hours=8))
    written = datetime(2027, 3, 1, 20, 30, tzinfo=beijing)  # 12:30 UTC
    engine = make_engine(db_url)
    with Session(engine) as s:
        s.add(OutboxEmail(to_addr="a@example.com", subject="s", body="b", created_at=written))
        # A naive value is taken to be UTC (as clock.utc does).
        s.add(
            OutboxEmail(
                to_addr="b@example.com",
                subject="s",
                body="b",
                created_at=datetime(2027, 3, 1, 12, 30),
                sent_at=None,
            )
        )
        s.commit()
    with Session(engine) as s:
        rows = s.exec(select(OutboxEmail).order_by(OutboxEmail.to_addr)).all()
        read = [r.created_at for r in rows]
        assert read == [datetime(2027, 3, 1, 12, 30, tzinfo=UTC)] * 2
        assert all(r.tzinfo is UTC for r in read)
        assert rows[0].sent_at is None
        # Comparisons in SQL use the same normalisation.
        later = s.exec(
            select(OutboxEmail).where(OutboxEmail.created_at > written - timedelta(minutes=1))
        ).all()
        assert len(later) == 2
    engine.dispose()
