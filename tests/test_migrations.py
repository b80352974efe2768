"""The schema is what the migrations build, and the models match it exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from app.db import metadata
from app.migrate import head_revision


def test_upgrade_head_builds_every_table_and_models_match(db_url: str) -> None:
    # db_url was built by `alembic upgrade head` on an empty database.
    engine = create_engine(db_url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        assert ctx.get_current_revision() == head_revision()
        diff = compare_metadata(ctx, metadata)
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert not diff, f"models differ from migrations: {diff}"
    assert {t.name for t in metadata.sorted_tables} <= tables


def test_naming_convention_is_set() -> None:
    assert metadata.naming_convention["fk"].startswith("fk_")
    assert metadata.naming_convention["pk"] == "pk_%(table_name)s"
