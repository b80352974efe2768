"""Every table module, imported so SQLModel's metadata (and Alembic) sees all tables.

Add your new ``models.py`` here (and regenerate the initial migration)."""

from __future__ import annotations

from types import ModuleType

from app import clock, textguard
from app.accounts import audit as accounts_audit
from app.accounts import models as accounts_models
from app.catalog import models as catalog_models
from app.ledger import models as ledger_models
from app.notifications import models as notifications_models
from app.orders import models as orders_models
from app.payments import models as payments_models
from app.quotes import models as quotes_models

MODEL_MODULES: tuple[ModuleType, ...] = (
    clock,
    accounts_models,
    accounts_audit,
    catalog_models,
    ledger_models,
    payments_models,
    orders_models,
    quotes_models,
    notifications_models,
)


def import_models() -> None:
    """The imports above did it; kept as the one call CLIs, migrations and tests make.
    Also installs the text guard: NUL bytes and bidi controls never reach the database."""
    textguard.install()
