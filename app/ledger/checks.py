"""The ledger's own invariants, over its own tables only (zero-sum entries, balances, holds,
receipts and their lines, credit notes, the seller each document names). The checks that meet other domains' rows (lease credits against orders, top-ups
against invoices) belong to those domains; ``app.reconcile.run_checks`` runs them all."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlmodel import Session


@dataclass(frozen=True)
class Violation:
    check: str
    detail: str


def _numbers_gap_free(docs: str, counters: str) -> str:
    """The years whose numbers in the document table ``docs`` do not run 1..N with no gap
    or repeat, or end elsewhere than the year's row of ``counters`` says."""
    return f"""SELECT y.year, COUNT(d.id), MAX(d.seq), MAX(c.last_number)
           FROM (SELECT year FROM {docs} UNION SELECT year FROM {counters}) y
           LEFT JOIN {docs} d ON d.year = y.year
           LEFT JOIN {counters} c ON c.year = y.year
           GROUP BY y.year
           HAVING COUNT(d.id) <> COALESCE(MAX(d.seq), 0)
               OR COUNT(DISTINCT d.seq) <> COUNT(d.id)
               OR COALESCE(MAX(d.seq), 0) <> COALESCE(MAX(c.last_number), 0)
               OR COALESCE(MIN(d.seq), 1) <> 1"""


# (name, description, SQL returning one row per violation: first column is an id, rest detail)
CHECKS: tuple[tuple[str, str, str], ...] = (
    (
        "zero_sum",
        "every entry has two or more postings summing to zero",
        """SELECT e.id, COALESCE(SUM(p.amount_cents), 0), COUNT(p.id)
           FROM ledger_entries e LEFT JOIN ledger_postings p ON p.entry_id = e.id
           GROUP BY e.id HAVING COALESCE(SUM(p.amount_cents), 0) <> 0 OR COUNT(p.id) < 2""",
    ),
    (
        "entry_amount",
        "each entry's amount equals the sum of its credits",
        """SELECT e.id, e.amount_cents, SUM(CASE WHEN p.amount_cents > 0 THEN p.amount_cents ELSE 0 END)
           FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
           GROUP BY e.id, e.amount_cents
           HAVING e.amount_cents <> SUM(CASE WHEN p.amount_cents > 0 THEN p.amount_cents ELSE 0 END)""",
    ),
    (
        "ledger_balanced",
        "all postings together sum to zero (money enters only through system accounts)",
        """SELECT 0, SUM(amount_cents) FROM ledger_postings HAVING SUM(amount_cents) <> 0""",
    ),
    (
        "cached_balances",
        "each customer account's cached balance equals the sum of its postings",
        """SELECT a.id, a.balance_cents, COALESCE(SUM(p.amount_cents), 0)
           FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.account_id = a.id
           WHERE a.kind <> 'system'
           GROUP BY a.id, a.balance_cents
           HAVING a.balance_cents <> COALESCE(SUM(p.amount_cents), 0)""",
    ),
    (
        "running_balances",
        "each posting's balance-after equals the running sum of its account",
        """SELECT id, balance_after_cents, running FROM (
             SELECT p.id, p.balance_after_cents,
                    SUM(p.amount_cents) OVER (PARTITION BY p.account_id ORDER BY p.id) AS running
             FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
             WHERE a.kind <> 'system') t
           WHERE balance_after_cents IS NULL OR balance_after_cents <> running""",
    ),
    (
        "non_negative",
        "no customer balance (cached, summed, or after any posting) is negative",
        """SELECT a.id, a.balance_cents, MIN(p.balance_after_cents)
           FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.account_id = a.id
           WHERE a.kind <> 'system'
           GROUP BY a.id, a.balance_cents
           HAVING a.balance_cents < 0 OR MIN(p.balance_after_cents) < 0
               OR COALESCE(SUM(p.amount_cents), 0) < 0""",
    ),
    (
        "holds_resolved_once",
        "each resolved hold has exactly one matching resolution entry; pending ones none",
        """SELECT h.id, h.status, COUNT(e.id)
           FROM ledger_holds h LEFT JOIN ledger_entries e
             ON e.hold_id = h.id AND e.kind IN ('hold_post', 'hold_void')
           GROUP BY h.id, h.status
           HAVING (h.status = 'pending' AND COUNT(e.id) <> 0)
               OR (h.status <> 'pending' AND COUNT(e.id) <> 1)
               OR (h.status = 'posted' AND SUM(CASE WHEN e.kind = 'hold_post' THEN 1 ELSE 0 END) <> 1)
               OR (h.status = 'voided' AND SUM(CASE WHEN e.kind = 'hold_void' THEN 1 ELSE 0 END) <> 1)""",
    ),
    (
        "held_matches_holds",
        "each customer's held balance equals the sum of their pending holds",
        """SELECT a.user_id, a.balance_cents, COALESCE(SUM(h.amount_cents), 0)
           FROM ledger_accounts a LEFT JOIN ledger_holds h
             ON h.user_id = a.user_id AND h.status = 'pending'
           WHERE a.kind = 'held'
           GROUP BY a.user_id, a.balance_cents
           HAVING a.balance_cents <> COALESCE(SUM(h.amount_cents), 0)""",
    ),
    (
        "invoice_credited_once",
        "each invoice is credited at most once",
        """SELECT invoice_id, COUNT(*) FROM ledger_entries
           WHERE kind = 'topup' GROUP BY invoice_id HAVING COUNT(*) > 1 OR invoice_id IS NULL""",
    ),
    (
        "receipt_per_charge",
        "each charge and top-up has exactly one receipt, of the same customer and amount",
        """SELECT e.id, e.kind, COUNT(r.id)
           FROM ledger_entries e LEFT JOIN receipts r ON r.entry_id = e.id
           WHERE e.kind IN ('topup', 'hold_post', 'charge')
           GROUP BY e.id, e.kind, e.amount_cents, e.user_id
           HAVING COUNT(r.id) <> 1 OR MIN(r.amount_cents) <> e.amount_cents
               OR MIN(r.user_id) <> e.user_id""",
    ),
    (
        "receipt_numbers_gap_free",
        "receipt numbers run 1..N in each year with no gap or repeat, matching the year's counter",
        _numbers_gap_free("receipts", "receipt_counters"),
    ),
    (
        "receipt_lines_sum",
        "a receipt's line items add up to its total",
        """SELECT r.number, r.amount_cents, SUM(l.total_cents)
           FROM receipts r JOIN receipt_lines l ON l.receipt_id = r.id
           GROUP BY r.id, r.number, r.amount_cents
           HAVING SUM(l.total_cents) <> r.amount_cents""",
    ),
    (
        "credit_note_per_refund",
        "each refund or credit of an order (a released reservation, a lease credit) has "
        "exactly one credit note, of the same customer and amount, and every credit note "
        "has its entry",
        """SELECT e.id, e.kind, COUNT(n.id)
           FROM ledger_entries e LEFT JOIN credit_notes n ON n.entry_id = e.id
           WHERE e.kind IN ('hold_void', 'lease_credit')
           GROUP BY e.id, e.kind, e.amount_cents, e.user_id
           HAVING COUNT(n.id) <> 1 OR MIN(n.amount_cents) <> e.amount_cents
               OR MIN(n.user_id) <> e.user_id
           UNION ALL
           SELECT n.entry_id, n.number, 0
           FROM credit_notes n LEFT JOIN ledger_entries e
             ON e.id = n.entry_id AND e.kind IN ('hold_void', 'lease_credit')
           WHERE e.id IS NULL""",
    ),
    (
        "credit_note_lines_sum",
        "a credit note has line items adding up to its total",
        """SELECT n.number, n.amount_cents, COALESCE(SUM(l.total_cents), 0)
           FROM credit_notes n LEFT JOIN credit_note_lines l ON l.credit_note_id = n.id
           GROUP BY n.id, n.number, n.amount_cents
           HAVING COUNT(l.id) = 0 OR COALESCE(SUM(l.total_cents), 0) <> n.amount_cents""",
    ),
    (
        "credit_note_corrects",
        "a credit note that names a receipt names one of its customer's, by its number",
        """SELECT n.number, n.receipt_number, r.number
           FROM credit_notes n LEFT JOIN receipts r ON r.id = n.receipt_id
           WHERE (n.receipt_id IS NULL AND n.receipt_number <> '')
              OR (n.receipt_id IS NOT NULL AND (r.id IS NULL OR r.number <> n.receipt_number
                  OR r.user_id <> n.user_id))""",
    ),
    (
        "seller_snapshot",
        "every receipt and credit note carries the seller it was issued by (legal name, "
        "an address, tax id), copied when it was issued",
        """SELECT 'receipt', number FROM receipts
           WHERE TRIM(seller_name) = '' OR TRIM(seller_tax_id) = ''
              OR (TRIM(seller_address_en) = '' AND TRIM(seller_address_zh) = '')
           UNION ALL
           SELECT 'credit_note', number FROM credit_notes
           WHERE TRIM(seller_name) = '' OR TRIM(seller_tax_id) = ''
              OR (TRIM(seller_address_en) = '' AND TRIM(seller_address_zh) = '')""",
    ),
    (
        "credit_note_numbers_gap_free",
        "credit-note numbers run 1..N in each year with no gap or repeat, matching the "
        "year's counter",
        _numbers_gap_free("credit_notes", "credit_note_counters"),
    ),
)


def ledger_checks(session: Session, *, only: set[str] | None = None) -> list[Violation]:
    """Run the ledger's own checks; an empty list means they hold."""
    out: list[Violation] = []
    for name, _desc, sql in CHECKS:
        if only is not None and name not in only:
            continue
        for row in session.exec(text(sql)).all():  # type: ignore[call-overload]
            out.append(Violation(name, ", ".join(str(v) for v in row)))
    return out


def describe() -> list[tuple[str, str]]:
    return [(name, desc) for name, desc, _ in CHECKS]
