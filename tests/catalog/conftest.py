"""Catalog fixtures: seeded stock."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from app.catalog.seed import seed
from tests.conftest import START


@pytest.fixture
def seeded(engine):  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        seed(s, START)
        s.commit()
    return engine
