"""Annotated dependency aliases shared by every router."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextvars import ContextVar
from datetime import datetime
from typing import Annotated, Any

from anyio import CancelScope, CapacityLimiter, to_thread
from anyio.lowlevel import RunVar
from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.db import reader, writer
from app.settings import Settings

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


# The session's end (commit or rollback, then close: database I/O) runs in a worker thread
# that waits for no free slot of the default pool: a request holding a pooled connection
# must never queue behind requests waiting for one (FastAPI does the same for a sync
# dependency's exit, with a new limiter per call). One limiter per event loop.
_CLEANUP: RunVar[CapacityLimiter] = RunVar("app_session_cleanup")


def _cleanup_limiter() -> CapacityLimiter:
    try:
        return _CLEANUP.get()
    except LookupError:
        limiter = CapacityLimiter(math.inf)
        _CLEANUP.set(limiter)
        return limiter


def _binds(state: Any) -> tuple[Engine, Engine]:
    """The app engine's reader and writer (``app.db``), made once per app and engine rather
    than per request (each ``execution_options`` call builds a new engine proxy)."""
    engine = state.engine
    found = getattr(state, "session_binds", None)
    if found is None or found[0] is not engine:
        found = state.session_binds = (engine, reader(engine), writer(engine))
    return found[1], found[2]


def _commit_and_close(session: Session) -> None:
    try:
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _rollback_and_close(session: Session) -> None:
    try:
        session.rollback()
    finally:
        session.close()


# ``session.info`` key: the request's transaction was already ended (committed or rolled
# back) in the handler's own worker thread (``settle_session``, app/web/routing.py).
_SETTLED = "app_request_settled"

# The request's session, for the handler's worker thread (``AppRoute``): set by
# ``get_session`` on the loop, in the request's task; a thread call copies the context.
_REQUEST_SESSION: ContextVar[Session | None] = ContextVar("app_request_session", default=None)


def request_session() -> Session | None:
    """The session ``get_session`` opened for this request, if any."""
    return _REQUEST_SESSION.get()


def settle_session(session: Session, *, commit: bool) -> None:
    """End the request's transaction in the calling worker thread, right after the
    handler: commit (rolled back if the commit fails) or roll back. ``get_session`` then
    has nothing left to do but close the session, which needs no I/O."""
    session.info[_SETTLED] = True
    if not commit:
        session.rollback()
        return
    try:
        session.commit()
    except BaseException:
        session.rollback()
        raise


def _settled(session: Session) -> bool:
    """Ended in the handler's thread, and nothing opened a transaction since."""
    return bool(session.info.pop(_SETTLED, False)) and not session.in_transaction()


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request owns the transaction: commit after the handler, roll back on error.

    Registered with ``scope="function"`` so the commit happens *before* the response is
    sent: a client never sees success for work that did not commit.

    Opening the session does no I/O (the connection is taken at its first statement, in
    the handler's or a dependency's worker thread), so it happens on the event loop: one
    thread-pool hop per request fewer. The end (commit or rollback, and close) runs in a
    worker thread, shielded from cancellation: for a ``def`` handler of an ``AppRoute``
    (app/web/routing.py) in the handler's own thread call, right after the handler
    (``settle_session``), so only the close (no I/O) is left here; otherwise in a thread
    call of its own.

    On SQLite a GET reads in a deferred transaction (no write lock; a GET that must write
    does so in its own short ``transaction(engine)``); every other method writes, so its
    transaction starts with ``BEGIN IMMEDIATE`` (see ``app.db.reader``).
    """
    read, write = _binds(request.app.state)
    bind = read if request.method in READ_METHODS else write
    session = Session(bind, expire_on_commit=False)
    request.state.db = session
    _REQUEST_SESSION.set(session)  # this request's task only
    try:
        yield session
    except BaseException:
        if _settled(session):
            session.close()
        else:
            with CancelScope(shield=True):
                await to_thread.run_sync(_rollback_and_close, session, limiter=_cleanup_limiter())
        raise
    if _settled(session):
        session.close()
        return
    with CancelScope(shield=True):
        await to_thread.run_sync(_commit_and_close, session, limiter=_cleanup_limiter())


# No I/O in these: ``async def`` so FastAPI calls them on the loop, not in a worker thread.
async def get_now(request: Request) -> datetime:
    return request.app.state.clock.now()  # type: ignore[no-any-return]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
NowDep = Annotated[datetime, Depends(get_now)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
