"""``python -m app catalog stock`` (stock per SKU and the one-node promise) and
``python -m app catalog promise SKU QUANTITY [--tz Asia/Shanghai]``."""

from __future__ import annotations

import argparse

from app.catalog import service as svc
from app.catalog.specs import all_specs
from app.clock import SimulatedClock, SystemClock
from app.db import make_engine, transaction
from app.settings import Settings
from app.tables import import_models


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cat = subparsers.add_parser("catalog", help="stock and delivery promises")
    sub = cat.add_subparsers(dest="action", required=True)
    sub.add_parser("stock", help="nodes per state and the promise for one node").set_defaults(
        func=cmd_stock
    )
    p = sub.add_parser("promise", help="what we would promise for a quantity now")
    p.add_argument("sku", choices=[s.id for s in all_specs()])
    p.add_argument("quantity", type=int)
    p.add_argument("--tz", default="UTC")
    p.set_defaults(func=cmd_promise)


def _engine_and_now():  # type: ignore[no-untyped-def]

    import_models()
    settings = Settings()
    engine = make_engine(settings.database_url)
    clock = SimulatedClock(engine) if settings.simulation else SystemClock()
    return engine, clock.now()


def cmd_stock(args: argparse.Namespace) -> int:

    engine, now = _engine_and_now()
    with transaction(engine) as session:
        summary = svc.stock_summary(session)
        for s in all_specs():
            p = svc.current_promise(session, s.id, 1, now)
            states = ", ".join(f"{k} {v}" for k, v in sorted(summary.get(s.id, {}).items()))
            when = p.date.isoformat() if p.date else "talk to sales"
            print(f"{s.id:<12} {states or 'no nodes':<40} one node: {when} ({p.explanation})")
    engine.dispose()
    return 0


def cmd_promise(args: argparse.Namespace) -> int:

    engine, now = _engine_and_now()
    with transaction(engine) as session:
        p = svc.current_promise(session, args.sku, args.quantity, now, args.tz)
    engine.dispose()
    print(p.date.isoformat() if p.date else "talk to sales", "-", p.explanation)
    return 0 if p.available else 2
