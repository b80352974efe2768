"""The composition root: ``create_app(settings)`` builds everything; nothing is global."""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles

from app import logs
from app.accounts import routes as accounts_routes
from app.accounts import twofactor_routes
from app.accounts.deps import load_user
from app.accounts.security import SESSION_COOKIE
from app.api import accounts as api_accounts
from app.api import launch as api_launch
from app.api import ledger as api_ledger
from app.api import orders as api_orders
from app.api import sizing as api_sizing
from app.catalog import routes as catalog_routes
from app.clock import Clock, SimulatedClock, SystemClock
from app.configurator import launch_routes as configurator_launch_routes
from app.configurator import routes as configurator_routes
from app.db import make_engine
from app.ledger import routes as ledger_routes
from app.ledger.service import use_seller
from app.notifications.service import use_base_url
from app.orders import control_routes
from app.orders import launch_routes as orders_launch_routes
from app.orders import routes as orders_routes
from app.payments import routes as payments_routes
from app.payments.service import make_provider, use_provider
from app.quotes import routes as quotes_routes
from app.settings import Settings
from app.staff import routes as staff_routes
from app.tables import MODEL_MODULES, import_models
from app.warmup import warm_process
from app.web import routes as web_routes
from app.web.csrf import csrf_protect
from app.web.encoding import MINIMUM_SIZE, Compress
from app.web.errors import install_handlers
from app.web.middleware import AppMiddleware, BodyLimit, ConcurrencyLimit
from app.web.proxy import AllowedHosts, TrustedProxies
from app.web.templating import STATIC_DIR, make_templates

__all__ = ["MODEL_MODULES", "ROUTERS", "asgi", "create_app", "import_models"]

# Routers, in the order their paths should match.
ROUTERS = (
    web_routes.router,
    # early: routes are matched in order, and the live /size fragment is the most frequent
    # request (it has one fixed path, so it shadows nothing)
    configurator_routes.router,
    configurator_launch_routes.router,
    # the JSON API next: its paths all start with /api/ and no page's does, so the order
    # changes no match; a checkout's POST /api/v1/orders no longer walks ~70 page routes
    api_orders.router,
    api_ledger.router,
    api_accounts.router,
    api_sizing.router,
    api_launch.router,
    accounts_routes.router,
    twofactor_routes.router,
    catalog_routes.router,
    orders_routes.router,
    control_routes.router,
    orders_launch_routes.router,
    ledger_routes.router,
    payments_routes.router,
    quotes_routes.router,
    staff_routes.router,
)


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    settings = settings or Settings()
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
    app.state.templates = make_templates(auto_reload=settings.environment == "development")
    app.state.user_loader = load_user  # templates show who is logged in (error pages too)
    app.state.session_cookie = SESSION_COOKIE  # CSRF tokens are bound to the session

    app.state.payment_provider = make_provider(settings)
    use_provider(app.state.payment_provider)
    use_base_url(settings.base_url)  # the links in emails
    use_seller(settings)  # the seller copied into each receipt and credit note issued

    install_handlers(app)
    # Innermost first. At most as many requests in flight as pooled connections (see
    # ConcurrencyLimit); bodies are read (bounded in size and time) *before* a slot is
    # taken (BodyLimit), so a slow client holds no slot, thread, connection or lock;
    # AppMiddleware (request id, locale, headers, access log) wraps them all.
    app.add_middleware(ConcurrencyLimit, limit=settings.db_pool_size)
    app.add_middleware(BodyLimit)
    # Compress pages, fragments and static files (htmx is ~51 KB raw, ~16 KB gzipped).
    app.add_middleware(Compress, minimum_size=MINIMUM_SIZE)
    # A live /size fragment already rendered is answered here, before the router and the
    # thread pool (the most frequent request; app/configurator/routes.py), and before
    # Compress: it keeps its body gzipped once already, so it skips the compressor's checks.
    app.add_middleware(configurator_routes.CachedFragments)
    app.add_middleware(AppMiddleware, https=settings.https, default_locale=settings.default_locale)
    if settings.environment == "production":
        app.add_middleware(AllowedHosts, hosts=settings.host_names)
    # Outermost of all: the client address everything else sees (throttles, audit, logs).
    app.add_middleware(TrustedProxies, networks=settings.proxy_networks)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for router in ROUTERS:
        app.include_router(router)
    return app


def asgi() -> FastAPI:
    """Factory for ``uvicorn --factory app.main:asgi``: called once per worker process at
    start, so logging is configured here (not in ``create_app``)."""
    settings = Settings()
    logs.configure(settings.log_level)
    app = create_app(settings)
    warm_process()  # once per worker, before it serves (app/warmup.py)
    return app
