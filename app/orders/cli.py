"""``python -m app simulate``: the checkout simulator (see ``app/orders/simulate.py``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from app.db import make_engine
from app.ledger.cli import describe, run_checks
from app.migrate import upgrade
from app.orders.models import Order
from app.orders.simulate import Simulation, revenue_cents, summary
from app.settings import ROOT
from app.tables import import_models


def cmd_simulate(args: argparse.Namespace) -> int:

    import_models()
    url = args.database_url
    if not url:
        path = Path(ROOT) / "var" / f"simulate-{args.seed}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        url = f"sqlite:///{path}"
    print(
        f"simulating {args.customers} customers over {args.days} days (seed {args.seed}) in {url}"
    )
    started = time.perf_counter()
    upgrade(url)
    engine = make_engine(url)
    from sqlmodel import Session, select

    with Session(engine) as session:
        if session.exec(select(Order.id).limit(1)).first() is not None:
            engine.dispose()
            print(
                "that database already has orders; the simulator needs an empty one "
                "(leave out --database-url for a fresh SQLite file)",
                file=sys.stderr,
            )
            return 2
    try:
        sim = Simulation(
            engine,
            seed=args.seed,
            customers=args.customers,
            days=args.days,
            out=lambda line: print(line, flush=True),
            progress_every=args.progress_every,
        )
        stats = sim.run()
        for line in summary(stats, revenue_cents(engine), args.days):
            print(line)
        with Session(engine) as session:
            violations = run_checks(session)
    finally:
        engine.dispose()
    bad = {v.check for v in violations}
    print("ledger check:")
    for name, desc in describe():
        print(f"  [{'FAIL' if name in bad else ' ok '}] {name}: {desc}")
    for v in violations[:20]:
        print(f"    violation {v.check}: {v.detail}")
    print(f"finished in {time.perf_counter() - started:.1f} s")
    if violations:
        print(f"{len(violations)} ledger violation(s)", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="drive simulated customers through sizing, orders, top-ups, deliveries, "
        "cancellations and renewals, then check the ledger",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--customers", type=int, default=50)
    p.add_argument("--days", type=int, default=60)
    p.add_argument(
        "--database-url", default="", help="default: a fresh SQLite file var/simulate-<seed>.db"
    )
    p.add_argument("--progress-every", type=int, default=10, help="print progress every N days")
    p.set_defaults(func=cmd_simulate)
