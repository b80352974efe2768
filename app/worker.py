"""``python -m app worker``: runs what is due — renewal reminders, renewals, late notices, invoice expiry,
the email outbox and pruning old login-throttle rows — each job in its own transaction(s).

Several workers may run at once on PostgreSQL: every job locks the rows it works on
(``FOR UPDATE SKIP LOCKED``) and renewals are also guarded by a unique (order, period)
row and a ledger idempotency key, so each job is done once.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app import logs
from app.accounts.throttle import prune as prune_throttle
from app.clock import Clock, SimulatedClock, SystemClock
from app.db import make_engine, transaction
from app.ledger.service import use_seller
from app.notifications.service import send_outbox, use_base_url
from app.orders import renewals as lease_renewals
from app.payments.service import expire_due, make_provider, use_provider
from app.settings import Settings
from app.tables import import_models

log = logging.getLogger("app.worker")

Job = Callable[[Engine, datetime], Any]


def in_transaction(job: Callable[[Session, datetime], Any]) -> Job:
    """A job that does its whole round in one transaction."""

    def run(engine: Engine, now: datetime) -> Any:
        with transaction(engine) as session:
            return job(session, now)

    return run


def jobs(settings: Settings) -> list[tuple[str, Job]]:

    def outbox(engine: Engine, now: datetime) -> int:
        # Claims, sends and marks in short transactions of its own: no lock is held
        # while mail goes out.
        return send_outbox(
            engine,
            host=settings.smtp_host,
            port=settings.smtp_port,
            sender=settings.mail_from,
            now=now,
        )

    def renewals(engine: Engine, now: datetime) -> int:
        # One short transaction per lease (see run_due_renewals_each).
        return lease_renewals.run_due_renewals_each(engine, now).total()

    def reminders(engine: Engine, now: datetime) -> int:
        return lease_renewals.send_renewal_reminders(engine, now, base_url=settings.base_url)

    return [
        ("renewal_reminders", reminders),
        ("renewals", renewals),
        ("late_notices", in_transaction(lease_renewals.send_late_notices)),
        ("invoice_expiry", in_transaction(expire_due)),
        ("outbox", outbox),
        ("throttle_prune", in_transaction(prune_throttle)),
    ]


def run_once(
    engine: Engine, clock: Clock, settings: Settings, *, only: set[str] | None = None
) -> dict[str, Any]:
    """Run every due job once, each in its own transaction(s); a failing job is logged
    and the others still run. Returns what each job did (or the error)."""
    results: dict[str, Any] = {}
    for name, job in jobs(settings):
        if only is not None and name not in only:
            continue
        try:
            results[name] = job(engine, clock.now())
        except Exception as e:  # keep the loop alive; the job is retried next round
            log.exception("job %s failed", name)
            results[name] = f"error: {e.__class__.__name__}"
    return results


def run_forever(
    engine: Engine, clock: Clock, settings: Settings, interval: float, stop: threading.Event
) -> None:
    while not stop.is_set():
        results = run_once(engine, clock, settings)
        busy = {k: v for k, v in results.items() if v}
        if busy:
            log.info("worker round: %s", busy)
        stop.wait(interval)


def cmd_worker(args: argparse.Namespace) -> int:

    import_models()
    settings = Settings()
    logs.configure(settings.log_level)
    engine = make_engine(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    clock: Clock = SimulatedClock(engine) if settings.simulation else SystemClock()

    use_provider(make_provider(settings))  # invoice expiry re-reads the real provider
    use_base_url(settings.base_url)  # the links in emails
    use_seller(settings)  # the seller copied into each receipt and credit note issued
    try:
        if args.once:
            results = run_once(engine, clock, settings)
            for name, value in results.items():
                print(f"{name}: {value}")
            return 1 if any(str(v).startswith("error") for v in results.values()) else 0
        stop = threading.Event()

        def _stop(_sig: int, _frame: Any) -> None:
            log.info("worker stopping")
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        log.info("worker started (every %ss)", args.interval)
        run_forever(engine, clock, settings, args.interval, stop)
        return 0
    finally:
        engine.dispose()


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "worker", help="run due jobs: renewals, late notices, invoice expiry, email outbox"
    )
    p.add_argument("--once", action="store_true", help="run every job once and exit")
    p.add_argument(
        "--interval", type=float, default=10.0, help="seconds between rounds (default 10)"
    )
    p.set_defaults(func=cmd_worker)
