"""The composition root: ``create_app(settings)`` builds everything; nothing is global."""

from __future__ import annotations

import importlib
import logging

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from app.clock import Clock, SimulatedClock, SystemClock
from app.db import make_engine
from app.errors import install_handlers
from app.settings import Settings
from app.web.csrf import csrf_protect
from app.web.middleware import AppMiddleware, ConcurrencyLimit
from app.web.proxy import AllowedHosts, TrustedProxies
from app.web.templating import STATIC_DIR, make_templates

# Every table module, imported so SQLModel's metadata (and Alembic) sees all tables.
MODEL_MODULES = (
    "app.clock",
    "app.accounts.models",
    "app.accounts.audit",
    "app.catalog.models",
    "app.ledger.models",
    "app.payments.models",
    "app.orders.models",
    "app.quotes.models",
    "app.staff.models",
    "app.notifications.models",
)

# Routers, in the order their paths should match.
ROUTER_MODULES = (
    "app.web.routes",
    "app.accounts.routes",
    "app.catalog.routes",
    "app.configurator.routes",
    "app.orders.routes",
    "app.ledger.routes",
    "app.payments.routes",
    "app.quotes.routes",
    "app.staff.routes",
    "app.api.sizing",
    "app.api.accounts",
    "app.api.ledger",
    "app.api.orders",
)


def _optional_import(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name:  # the module itself does not exist (yet); anything else is a bug
            return None
        raise


def import_models() -> None:
    from app import textguard

    textguard.install()  # NUL bytes and bidi controls never reach the database
    for m in MODEL_MODULES:
        _optional_import(m)


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    settings = settings or Settings()
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    import_models()
    engine = make_engine(
        settings.database_url,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        pool_size=settings.db_pool_size,
    )
    if clock is None:
        clock = SimulatedClock(engine) if settings.simulation else SystemClock()

    app = FastAPI(
        title="GPU Nodes",
        version="0.1.0",
        description="Size LLM training jobs, rent 8-GPU nodes monthly, pay from a prepaid balance.",
        dependencies=[Depends(csrf_protect)],
        # No Swagger UI: it loads from a CDN our own CSP blocks. /openapi.json stays.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.clock = clock
    app.state.templates = make_templates()
    from app.payments.service import make_provider, use_provider

    app.state.payment_provider = make_provider(settings)
    use_provider(app.state.payment_provider)

    install_handlers(app)
    app.add_middleware(AppMiddleware, https=settings.https, default_locale=settings.default_locale)
    # At most as many requests in flight as pooled connections (see ConcurrencyLimit).
    app.add_middleware(ConcurrencyLimit, limit=settings.db_pool_size)
    # Outermost: compress pages, fragments and static files (htmx is ~51 KB raw, ~16 KB gzipped).
    app.add_middleware(GZipMiddleware, minimum_size=800)
    if settings.environment == "production":
        app.add_middleware(AllowedHosts, hosts=settings.host_names)
    # Outermost of all: the client address everything else sees (throttles, audit, logs).
    app.add_middleware(TrustedProxies, networks=settings.proxy_networks)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for name in ROUTER_MODULES:
        module = _optional_import(name)
        if module is not None:
            app.include_router(module.router)  # type: ignore[attr-defined]
    return app


def asgi() -> FastAPI:
    """Factory for ``uvicorn --factory app.main:asgi``."""
    return create_app()
