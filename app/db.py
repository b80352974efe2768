"""Engine and session: the request owns the transaction.

SQLite (the embedded default) gets WAL, foreign keys and a busy timeout on every
connection; PostgreSQL gets a pool with pre-ping so a restarted server is survived.

SQLite transactions start with ``BEGIN IMMEDIATE`` (writers serialise at the start, so
read-then-write races — the last node, a balance — cannot interleave) unless the unit of
work only reads: ``reader(engine)`` (every GET request's session, ``transaction(engine,
write=False)``) starts a *deferred* transaction, which never waits for the write lock.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import DateTime, MetaData, event, func
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect, Engine, make_url
from sqlalchemy.types import TypeDecorator
from sqlmodel import Session, SQLModel, col, create_engine, select

T = TypeVar("T", bound=SQLModel)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING_CONVENTION
metadata: MetaData = SQLModel.metadata


class UTCDateTime(TypeDecorator[datetime]):
    """The one timestamp column type: ``DateTime(timezone=True)`` that always hands back an
    aware UTC datetime (SQLite returns naive ones; PostgreSQL ones in the session's zone)
    and stores UTC (a naive value is taken to be UTC, as ``clock.utc`` does).

    Declare a column with ``Field(sa_type=UTCDateTime)``: nullability follows the
    annotation (``datetime | None`` is nullable, ``datetime`` is not); add ``index=True``
    where queries filter or sort on it. Migrations render it as ``sa.DateTime(timezone=True)``
    (``render_item`` in migrations/env.py)."""

    impl = DateTime
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(timezone=True)

    @staticmethod
    def _utc(value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return self._utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return self._utc(value)


# Execution option: this engine's SQLite transactions are deferred (reads: no write lock).
READ_OPTION = "app_sqlite_read_only"


def make_engine(url: str, *, busy_timeout_ms: int = 15000, pool_size: int = 10) -> Engine:
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        file_db = bool(u.database) and u.database != ":memory:"
        # Two connections per in-flight request at most (its session + the clock's read).
        pool_args = {"pool_size": pool_size, "max_overflow": pool_size} if file_db else {}
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
            **pool_args,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _rec: Any) -> None:
            # Let SQLAlchemy issue BEGIN itself so we can make it BEGIN IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            # Switching to WAL takes a lock; once the file is in WAL mode (it stays so), a
            # new connection must not ask again or it fails while a writer holds the lock.
            if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                # Locked: a later connection switches it.
                with contextlib.suppress(sqlite3.OperationalError):
                    cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # Writers serialise at BEGIN instead of failing later on lock upgrade:
            # read-then-write races (balances, last node) cannot interleave. Reads take
            # no write lock (WAL: they see a snapshot and never block the writer).
            if conn.get_execution_options().get(READ_OPTION):
                conn.exec_driver_sql("BEGIN")
            else:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size)


def reader(engine: Engine) -> Engine:
    """The same engine (same pool) whose SQLite transactions are deferred: for units of work
    that only read (a GET). Were one to write after all, SQLite upgrades the lock at the
    first write, or refuses with "database is locked" (503) if another writer got there
    first — never a lost update. PostgreSQL ignores the option."""
    if engine.get_execution_options().get(READ_OPTION):
        return engine
    return engine.execution_options(**{READ_OPTION: True})


def writer(engine: Engine) -> Engine:
    """The engine for a unit of work that writes (``BEGIN IMMEDIATE`` on SQLite)."""
    if engine.get_execution_options().get(READ_OPTION):
        return engine.execution_options(**{READ_OPTION: False})
    return engine


def is_postgres(session_or_engine: Session | Engine) -> bool:
    bind = (
        session_or_engine.get_bind()
        if isinstance(session_or_engine, Session)
        else session_or_engine
    )
    return bind.dialect.name == "postgresql"


@contextmanager
def transaction(engine: Engine, *, write: bool = True) -> Iterator[Session]:
    """A unit of work outside a request's own session (CLI, worker, a GET's short write):
    commit on success, roll back on error. ``write=False`` for pure reads (no write lock)."""
    bind = writer(engine) if write else reader(engine)
    with Session(bind, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def pg_type_name(type_: Any) -> str:
    """A column type as PostgreSQL spells it in a ``CAST`` of a plain text statement's
    parameter: the compiled name, text without a length (an explicit cast to
    ``VARCHAR(n)`` would cut a longer value where the column itself refuses it)."""

    name = str(type_.compile(dialect=postgresql.dialect()))
    if name.startswith("VARCHAR"):
        return "VARCHAR"
    return "TIMESTAMPTZ" if name == "TIMESTAMP WITH TIME ZONE" else name


def read_value(engine: Engine, sql: str) -> Any | None:
    """The first column of the first row of ``sql``, read on its own pooled DB-API connection
    outside any ORM session: on SQLite no ``BEGIN IMMEDIATE`` (so it never waits for a
    request's own write transaction), on PostgreSQL one statement rolled back at once.
    ``None`` when there is no row. The caller owns the table it names."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        try:
            cur.execute(sql)
            row = cur.fetchone()
        finally:
            cur.close()
        raw.rollback()
        return row[0] if row else None
    finally:
        raw.close()


def rows_of_user(
    session: Session, model: type[T], user_id: int, *, limit: int, offset: int = 0
) -> list[T]:
    """A customer's rows of ``model`` (a table with ``id`` and ``user_id``), newest first."""
    return list(
        session.exec(
            select(model)
            .where(col(model.user_id) == user_id)  # type: ignore[attr-defined]
            .order_by(col(model.id).desc())  # type: ignore[attr-defined]
            .offset(offset)
            .limit(limit)
        ).all()
    )


def count_of_user(session: Session, model: type[SQLModel], user_id: int) -> int:
    """How many rows of ``model`` belong to the customer."""
    return int(
        session.exec(
            select(func.count()).select_from(model).where(col(model.user_id) == user_id)  # type: ignore[attr-defined]
        ).one()
    )


def rows_where(session: Session, model: type[T], *where: Any, order_by: Any) -> list[T]:
    """Every row of ``model`` matching ``where``, in ``order_by`` order."""
    return list(session.exec(select(model).where(*where).order_by(order_by)).all())
