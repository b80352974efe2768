"""Annotated dependency aliases shared by every router."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from app.clock import Clock
from app.db import reader, writer
from app.settings import Settings

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_session(request: Request) -> Iterator[Session]:
    """The request owns the transaction: commit after the handler, roll back on error.

    Registered with ``scope="function"`` so the commit happens *before* the response is
    sent: a client never sees success for work that did not commit.

    On SQLite a GET reads in a deferred transaction (no write lock; a GET that must write
    does so in its own short ``transaction(engine)``); every other method writes, so its
    transaction starts with ``BEGIN IMMEDIATE`` (see ``app.db.reader``).
    """
    engine = request.app.state.engine
    bind = reader(engine) if request.method in READ_METHODS else writer(engine)
    session = Session(bind, expire_on_commit=False)
    request.state.db = session
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_clock(request: Request) -> Clock:
    return request.app.state.clock  # type: ignore[no-any-return]


def get_now(request: Request) -> datetime:
    return request.app.state.clock.now()  # type: ignore[no-any-return]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ClockDep = Annotated[Clock, Depends(get_clock)]
NowDep = Annotated[datetime, Depends(get_now)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
