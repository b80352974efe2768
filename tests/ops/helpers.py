"""Arrange orders through the real services: catalog stock, a balance, create, pay."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.factories import host_fingerprint as fingerprint
from tests.support.factories import make_order as paid_order
from tests.support.factories import ssh_public_key

__all__ = ["fingerprint", "paid_order", "seed_catalog", "ssh_public_key"]


def seed_catalog(engine: Engine, now: datetime) -> None:
    from app.catalog.seed import seed

    with Session(engine) as s:
        seed(s, now)
        s.commit()
