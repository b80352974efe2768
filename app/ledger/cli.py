"""``python -m app ledger check``: reconcile the ledger; non-zero exit on any violation."""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.db import make_engine
from app.ledger.models import Hold, JournalEntry, LedgerAccount, Posting
from app.reconcile import Violation, describe, run_checks
from app.settings import Settings
from app.tables import import_models

__all__ = ["Violation", "register", "run_checks"]


def cmd_check(args: argparse.Namespace) -> int:

    import_models()
    engine = make_engine(args.database_url or Settings().database_url)
    try:
        with Session(engine) as session:
            counts = {
                "entries": session.exec(select(func.count()).select_from(JournalEntry)).one(),
                "postings": session.exec(select(func.count()).select_from(Posting)).one(),
                "accounts": session.exec(select(func.count()).select_from(LedgerAccount)).one(),
                "holds": session.exec(select(func.count()).select_from(Hold)).one(),
            }
            violations = run_checks(session)
    finally:
        engine.dispose()
    print("ledger check: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    bad: dict[str, list[Violation]] = {}
    for v in violations:
        bad.setdefault(v.check, []).append(v)
    for name, desc in describe():
        found = bad.get(name, [])
        print(f"  [{'FAIL' if found else ' ok '}] {name}: {desc}")
        for v in found[:20]:
            print(f"         violation: {v.detail}")
        if len(found) > 20:
            print(f"         … and {len(found) - 20} more")
    if violations:
        print(f"{len(violations)} violation(s)")
        return 1
    print("all checks passed")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ledger", help="the prepaid-balance ledger")
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("check", help="verify zero-sum, balances, holds and invoice credits")
    c.add_argument("--database-url", default=None, help="defaults to the app's database")
    c.set_defaults(func=cmd_check)
