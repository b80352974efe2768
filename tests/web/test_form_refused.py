"""``app.web.forms.refused``: a refused form changes nothing and keeps its messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.db import make_engine
from app.errors import InvalidInput, NotFound
from app.web.forms import refused


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'f.db'}")
    with engine.begin() as c:
        c.execute(text("CREATE TABLE t (v TEXT)"))
    return engine


def _rows(engine) -> list[str]:  # type: ignore[no-untyped-def]
    with engine.connect() as c:
        return [r[0] for r in c.execute(text("SELECT v FROM t"))]


def test_invalid_input_rolls_back_and_keeps_the_messages(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as s:
        with refused(s) as failed:
            s.execute(text("INSERT INTO t VALUES ('half')"))
            raise InvalidInput(errors={"quantity": "Enter a whole number of nodes."})
        s.commit()  # what the request does next: commits nothing of the refused work
    assert failed.errors == {"quantity": "Enter a whole number of nodes."}
    assert _rows(engine) == []


def test_work_that_goes_through_is_kept(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as s:
        with refused(s) as failed:
            s.execute(text("INSERT INTO t VALUES ('ok')"))
        s.commit()
    assert failed.errors is None and _rows(engine) == ["ok"]


def test_other_errors_pass_through(tmp_path: Path) -> None:
    with Session(_engine(tmp_path)) as s, pytest.raises(NotFound), refused(s):
        raise NotFound()
