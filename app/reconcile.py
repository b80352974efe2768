"""Reconciliation: the invariants ``python -m app ledger check`` and the simulator verify.

Each domain checks its own rows: the ledger its entries, balances, holds and receipts
(``app.ledger.checks``); orders its lease credits and payments its invoices, each against
the ledger's facts read through ``app.ledger.service`` (``lease_credits``,
``topup_credits``). No check reads another domain's tables."""

from __future__ import annotations

from sqlmodel import Session

from app.ledger.checks import CHECKS, Violation, ledger_checks
from app.orders.queries import lease_credit_problems
from app.payments.service import invoice_credit_problems

CROSS = (
    (
        "lease_credit_once",
        "an early-ended lease is credited at most once, to its own customer, named for its order",
    ),
    (
        "invoice_credit_matches",
        "each top-up credit matches its invoice (customer, amount, crypto received)",
    ),
    ("invoice_credit_exists", "each invoice marked credited has its ledger entry"),
)


def run_checks(session: Session, *, only: set[str] | None = None) -> list[Violation]:
    """Every invariant; an empty list means the books reconcile."""
    out = ledger_checks(session, only=only)

    def wanted(name: str) -> bool:
        return only is None or name in only

    if wanted("lease_credit_once"):
        out += [Violation("lease_credit_once", d) for d in lease_credit_problems(session)]
    if wanted("invoice_credit_matches") or wanted("invoice_credit_exists"):
        mismatched, missing = invoice_credit_problems(session)
        if wanted("invoice_credit_matches"):
            out += [Violation("invoice_credit_matches", d) for d in mismatched]
        if wanted("invoice_credit_exists"):
            out += [Violation("invoice_credit_exists", d) for d in missing]
    return out


def describe() -> list[tuple[str, str]]:
    return [(name, desc) for name, desc, _ in CHECKS] + list(CROSS)


__all__ = ["Violation", "describe", "run_checks"]
