"""Every string written to the database loses NUL bytes and bidi controls (``app.text``).

One rule on SQLite and PostgreSQL: PostgreSQL refuses NUL in text, SQLite stores it; right-
to-left overrides make stored names and notes read differently than they are. Registered
once on SQLAlchemy's ``Session`` by ``app.main.import_models``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from app.text import strip_unsafe

_INSTALLED = False


def _clean(session: Session, _ctx: Any, _instances: Any) -> None:
    for obj in (*session.new, *session.dirty):
        try:
            mapper = inspect(obj).mapper
        except Exception:  # noqa: BLE001, S112 - not a mapped object
            continue
        for attr in mapper.column_attrs:
            value = obj.__dict__.get(attr.key)
            if isinstance(value, str):
                cleaned = strip_unsafe(value)
                if cleaned != value:
                    setattr(obj, attr.key, cleaned)


def install() -> None:
    global _INSTALLED
    if not _INSTALLED:
        event.listen(Session, "before_flush", _clean)
        _INSTALLED = True
