"""Receipts a finance team accepts and credit notes for every refund: line items passed by
orders as typed values and copied into the ledger's rows, the seller beside the buyer, in
English and Chinese, totals equal to the ledger entry to the cent; one credit note per
refund or lease credit, numbered in its own gap-free sequence, covered by ``ledger check``."""

from __future__ import annotations

import io
from datetime import date, timedelta
from typing import Any

import pytest
from pypdf import PdfReader
from sqlalchemy import text
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.clock import utc
from app.ledger import service as ledger
from app.ledger.invoicing import InvoiceLine, LineError, check_lines
from app.ledger.models import (
    CreditNote,
    CreditNoteLine,
    JournalEntry,
    Receipt,
    ReceiptLine,
)
from app.orders import service as orders
from app.orders.lease_end import end_lease
from app.orders.models import Order
from app.reconcile import describe, run_checks
from tests.ops.helpers import fingerprint, paid_order, seed_catalog
from tests.support import factories

H100 = "hgx-h100"
CHECKS = {name for name, _ in describe()} - {"invoice_credit_matches", "invoice_credit_exists"}


def _pdf_text(body: bytes) -> str:
    return "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(body)).pages)


def _rows(engine: Any, model: Any, **where: Any) -> list[Any]:
    with Session(engine) as s:
        stmt = select(model)
        for k, v in where.items():
            stmt = stmt.where(getattr(model, k) == v)
        return list(s.exec(stmt.order_by(col(model.id))).all())


def _stock(engine: Any, now: Any, n: int = 4) -> None:
    from app.catalog import service as catalog

    seed_catalog(engine, now)
    with Session(engine) as s:
        for _ in range(n):
            catalog.add_node(s, sku_id=H100, now=now)
        s.commit()


def _deliver(engine: Any, order_id: int, now: Any) -> Order:
    """Ops hand every node of the order over (one host each), then mark it delivered."""
    from app.orders import ops

    with Session(engine, expire_on_commit=False) as s:
        staff = User(email=f"ops{order_id}@example.com", password_hash="x", role="ops",
                     created_at=now)  # fmt: skip
        s.add(staff)
        s.flush()
        o = s.get(Order, order_id)
        assert o is not None
        hosts = [ops.HostInput(ip=f"203.0.113.{i + 10}", fingerprints=fingerprint(f"{order_id}-{i}"))
                 for i in range(o.quantity)]  # fmt: skip
        ops.set_credentials(s, actor=staff, order_id=order_id,
                            data=ops.CredentialsInput(ssh_user="ubuntu", hosts=hosts), now=now)  # fmt: skip
        ops.mark_delivered(s, actor=staff, order_id=order_id, now=now)
        s.commit()
        o = s.get(Order, order_id)
        assert o is not None
        return o


def _quoted_order(engine: Any, make_user: Any, user: User, now: Any, discount_bp: int) -> Order:
    """An order of two H100 nodes priced from a sent quote with ``discount_bp`` off."""
    from app.quotes import service as quotes

    sales = make_user(role="sales")
    with Session(engine, expire_on_commit=False) as s:
        q = quotes.create_quote(
            s,
            actor=sales,
            data=quotes.QuoteInput(
                prospect_name="Ada",
                prospect_email=user.email,
                prospect_company="Lab",
                sku_id=H100,
                quantity=2,
                months=1,
                discount_bp=discount_bp,
                valid_days=7,
                sizing_query="",
                sizing_notes="",
                notes="",
            ),
            now=now,
        )
        quotes.send_quote(s, q, actor=sales, now=now)
        s.commit()
    order = paid_order(engine, user, now, sku=H100, nodes=2, pay=False, key="quoted")
    with Session(engine, expire_on_commit=False) as s:
        o = s.get(Order, order.id)
        assert o is not None
        o.quote_id = q.id
        o.unit_price_cents = q.unit_price_cents
        o.monthly_total_cents = q.unit_price_cents * 2
        s.add(o)
        u = s.get(User, user.id)
        assert u is not None
        factories.fund(s, u.id or 0, o.monthly_total_cents * 3, now, "quoted-fund")
        orders.pay_order(s, user=u, order_id=o.id or 0, idempotency_key="pay-quoted", now=now)
        s.commit()
        return o


# --- the pure rule -----------------------------------------------------------------------


def test_a_line_comes_to_its_nodes_times_the_unit_price_less_the_discount() -> None:
    month = InvoiceLine(sku=H100, description="HGX H100", quantity=2, unit_cents=1_000_001,
                        discount_cents=100_001)  # fmt: skip
    assert month.total_cents == 1_900_001
    # pro rata: the rule of unused_days_credit, rounded down to the cent
    part = InvoiceLine(sku=H100, description="HGX H100", quantity=2, unit_cents=1_000_001,
                       discount_cents=100_001, days=10, days_of=31)  # fmt: skip
    assert part.total_cents == 1_900_001 * 10 // 31 == 612_903
    check_lines([month], 1_900_001)
    with pytest.raises(LineError):
        check_lines([month], 1_900_000)
    with pytest.raises(LineError):
        InvoiceLine(sku=H100, description="x", quantity=1, unit_cents=10, discount_cents=11)
    with pytest.raises(LineError):
        InvoiceLine(sku=H100, description="x", quantity=1, unit_cents=10, days=3)


def test_lines_that_do_not_add_up_issue_nothing(
    session: Session, make_user: Any, clock: Any
) -> None:
    u = make_user()
    factories.fund(session, u.id, 10_000, clock.now(), "f")
    wrong = InvoiceLine(sku=H100, description="HGX H100", quantity=1, unit_cents=999)
    with pytest.raises(LineError):
        ledger.charge(session, user_id=u.id, amount_cents=1_000, idempotency_key="c",
                      now=clock.now(), reason="r", lines=[wrong])  # fmt: skip
    session.rollback()
    assert session.exec(select(Receipt)).all() == []
    assert ledger.available_cents(session, u.id) == 10_000


# --- invoices: delivery, renewal ------------------------------------------------------------


def test_delivery_and_renewal_receipts_list_the_quoted_lines_and_equal_the_charge(
    engine: Any, make_user: Any, clock: Any
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = _quoted_order(engine, make_user, u, now, discount_bp=750)
    delivered = _deliver(engine, order.id or 0, now)
    start, end = utc(delivered.period_start), utc(delivered.period_end)
    (first,) = _rows(engine, Receipt, order_id=order.id)
    (line,) = _rows(engine, ReceiptLine, receipt_id=first.id)
    with Session(engine) as s:  # the list price the quote discounted from
        from app.quotes import service as quotes

        listed = quotes.quoted_list_unit_cents(s, order.quote_id or 0)
    assert listed is not None and listed > order.unit_price_cents
    assert (line.sku, line.description, line.quantity) == (H100, "HGX H100", 2)
    assert line.unit_cents == listed
    assert line.discount_cents == (listed - order.unit_price_cents) * 2 > 0
    assert (line.period_start, line.period_end) == (start.date(), end.date())
    entry = _rows(engine, JournalEntry, id=first.entry_id)[0]
    assert line.total_cents == first.amount_cents == entry.amount_cents == order.monthly_total_cents
    # the renewal's receipt: the next month, same lines, its own service period
    factories.fund(engine, u, order.monthly_total_cents, now, "renew")
    with Session(engine) as s:
        from app.orders import renewals

        renewals.run_due_renewals(s, end + timedelta(minutes=1))
        s.commit()
    receipts = _rows(engine, Receipt, order_id=order.id)
    assert len(receipts) == 2
    (renewal_line,) = _rows(engine, ReceiptLine, receipt_id=receipts[1].id)
    assert renewal_line.period_start == end.date() == date(2027, 1, 1)
    assert renewal_line.period_end == date(2027, 2, 1)
    assert renewal_line.total_cents == receipts[1].amount_cents == order.monthly_total_cents
    with Session(engine) as s:
        assert run_checks(s, only=CHECKS) == []


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_the_receipt_names_seller_and_buyer_and_its_lines_in_both_languages(
    engine: Any, make_user: Any, clock: Any, client: Any, login: Any, lang: str
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    login(client, u)
    client.post("/account/billing",
                data={"company": "北京深度求索", "billing_address": "海淀区 8 号", "tax_id": "T-42"})  # fmt: skip
    order = _quoted_order(engine, make_user, u, now, discount_bp=500)
    _deliver(engine, order.id or 0, now)
    (receipt,) = _rows(engine, Receipt, order_id=order.id)
    client.cookies.set("lang", lang)
    page = client.get(f"/receipts/{receipt.number}").text
    pdf = _pdf_text(client.get(f"/receipts/{receipt.number}/pdf?lang={lang}").content)
    for shown in (page, pdf):
        # the seller: legal name, both addresses, tax id; the buyer beside it
        assert "GPU Nodes Ltd." in shown and "GPU 节点有限公司" in shown
        assert "25 Harbour Road" in shown and "香港湾仔港湾道" in shown
        assert "BR 7612 3456" in shown
        assert "北京深度求索" in shown and "T-42" in shown
        assert "HGX H100" in shown
    money = "US$" if lang == "en" else "US$"
    unit = f"{money}{order.unit_price_cents * 100 // 95 / 100:,.2f}"
    total = f"{money}{order.monthly_total_cents / 100:,.2f}"
    assert unit in page and total in page
    assert unit.replace("US$", "") in pdf and total.replace("US$", "") in pdf
    if lang == "en":
        assert "Service period: Dec 1, 2026 – Jan 1, 2027" in page
        assert "Unit price per node-month" in page and "Seller" in page
        assert "Service period: Dec 1, 2026 – Jan 1, 2027" in pdf
    else:
        assert "服务期：2026年12月1日至2027年1月1日" in page
        assert "销售方" in page and "单价（每节点每月）" in page
        assert "服务期：2026年12月1日至2027年1月1日" in pdf.replace(" ", "")
        assert "收据" in pdf


# --- credit notes: every refund path -------------------------------------------------------


def _cancel(engine: Any, user: User, order_id: int, now: Any) -> None:
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None
        orders.cancel_order(s, user=u, order_id=order_id, now=now)
        s.commit()


def test_cancel_before_delivery_issues_a_credit_note_for_the_released_first_month(
    engine: Any, make_user: Any, clock: Any
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = paid_order(engine, u, now, sku=H100, nodes=2, key="a")
    _cancel(engine, u, order.id or 0, now)
    _cancel(engine, u, order.id or 0, now)  # a repeated cancel issues nothing more
    (note,) = _rows(engine, CreditNote, order_id=order.id)
    assert note.number == f"CN-{now.year}-000001" and note.reason == "cancelled"
    assert note.receipt_id is None and note.receipt_number == ""  # nothing was invoiced yet
    (void,) = _rows(engine, JournalEntry, kind="hold_void")
    assert note.entry_id == void.id and note.amount_cents == void.amount_cents
    (line,) = _rows(engine, CreditNoteLine, credit_note_id=note.id)
    assert (line.quantity, line.unit_cents, line.period_start) == (2, order.unit_price_cents, None)
    assert line.total_cents == note.amount_cents == order.monthly_total_cents


def test_a_missed_delivery_refund_says_so(engine: Any, make_user: Any, clock: Any) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = paid_order(engine, u, now, sku=H100, key="late")
    late = now + timedelta(days=30)  # well past the promised date
    _cancel(engine, u, order.id or 0, late)
    (note,) = _rows(engine, CreditNote, order_id=order.id)
    assert note.reason == "missed_delivery" and note.amount_cents == order.monthly_total_cents


def test_a_lease_ended_early_credits_its_unused_days_against_the_receipt(
    engine: Any, make_user: Any, clock: Any, client: Any, login: Any
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = _quoted_order(engine, make_user, u, now, discount_bp=300)
    _deliver(engine, order.id or 0, now)
    (receipt,) = _rows(engine, Receipt, order_id=order.id)
    ops = make_user(role="ops")
    when = now + timedelta(days=10, hours=3)
    for _ in range(2):  # ops confirm twice: one credit, one note
        with Session(engine) as s:
            staff = s.get(User, ops.id)
            assert staff is not None
            o = s.get(Order, order.id)
            assert o is not None
            if o.status == "delivered":
                end_lease(s, actor=staff, order_id=order.id or 0, now=when,
                          reason="hardware fault on the node", confirm=True)  # fmt: skip
            with pytest.raises(ledger.IdempotencyConflict):  # never a second, other credit
                ledger.credit_unused_days(s, user_id=u.id, order_id=order.id or 0,
                                          amount_cents=1, days=1, now=when)  # fmt: skip
            s.commit()
    (credit,) = _rows(engine, JournalEntry, kind="lease_credit")
    (note,) = _rows(engine, CreditNote, order_id=order.id)
    assert note.receipt_id == receipt.id and note.receipt_number == receipt.number
    assert note.reason == "lease_ended_early" and note.entry_id == credit.id
    (line,) = _rows(engine, CreditNoteLine, credit_note_id=note.id)
    # 20 whole days of the 31-day month are unused: pro rata of the discounted month
    assert (line.days, line.days_of) == (20, 31)
    assert line.discount_cents > 0
    assert line.total_cents == order.monthly_total_cents * 20 // 31 == note.amount_cents
    assert note.amount_cents == credit.amount_cents
    assert line.period_start == date(2026, 12, 11) and line.period_end == date(2027, 1, 1)
    # the customer sees it: on the order page, the receipts list, the receipt it corrects
    login(client, u)
    assert note.number in client.get(f"/console/orders/{order.id}").text
    assert note.number in client.get("/receipts").text
    assert note.number in client.get(f"/receipts/{receipt.number}").text
    assert note.number in client.get("/balance").text
    for lang in ("en", "zh_CN"):
        client.cookies.set("lang", lang)
        page = client.get(f"/credit-notes/{note.number}").text
        pdf = _pdf_text(client.get(f"/credit-notes/{note.number}/pdf?lang={lang}").content)
        for shown in (page, pdf):
            assert receipt.number in shown and "BR 7612 3456" in shown and "HGX H100" in shown
            assert f"{note.amount_cents / 100:,.2f}" in shown
        if lang == "en":
            assert "Credit note" in pdf and "pro rata: 20 of 31 days" in page
            assert "ended early by our operations team" in page
        else:
            assert "贷项通知单" in pdf and "按比例：31天中的20天" in page
            assert "提前结束了租约" in page
    with Session(engine) as s:
        assert run_checks(s, only=CHECKS) == []


def test_credit_notes_are_private(
    engine: Any, make_user: Any, clock: Any, new_client: Any, login: Any
) -> None:
    now = clock.now()
    _stock(engine, now)
    a, b = make_user(), make_user()
    order = paid_order(engine, a, now, sku=H100, key="p")
    _cancel(engine, a, order.id or 0, now)
    (note,) = _rows(engine, CreditNote)
    other = login(new_client(), b)
    assert other.get(f"/credit-notes/{note.number}").status_code == 404
    assert other.get(f"/credit-notes/{note.number}/pdf").status_code == 404
    assert login(new_client(), a).get(f"/credit-notes/{note.number}").status_code == 200


# --- ledger check catches broken rows ---------------------------------------------------------


@pytest.mark.parametrize(
    ("breakage", "check"),
    [
        ("UPDATE credit_note_lines SET total_cents = total_cents - 1", "credit_note_lines_sum"),
        ("UPDATE credit_notes SET amount_cents = amount_cents + 1", "credit_note_per_refund"),
        ("DELETE FROM credit_note_lines", "credit_note_lines_sum"),
        (
            "UPDATE credit_notes SET seq = 3, number = 'CN-2026-000003'",
            "credit_note_numbers_gap_free",
        ),
        ("UPDATE receipt_lines SET total_cents = total_cents + 1", "receipt_lines_sum"),
        ("UPDATE credit_notes SET receipt_number = 'R-2026-999999'", "credit_note_corrects"),
    ],
)
def test_ledger_check_catches_a_broken_document(
    engine: Any, make_user: Any, clock: Any, breakage: str, check: str
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = paid_order(engine, u, now, sku=H100, key="b1")
    _deliver(engine, order.id or 0, now)
    other = paid_order(engine, u, now, sku=H100, key="b2")
    _cancel(engine, u, other.id or 0, now)
    with Session(engine) as s:
        assert run_checks(s, only=CHECKS) == []
        if "receipt_number" in breakage:  # a note that names a receipt it does not correct
            s.exec(text("UPDATE credit_notes SET receipt_id = (SELECT MIN(id) FROM receipts)"))  # type: ignore[call-overload]
        s.exec(text(breakage))  # type: ignore[call-overload]
        s.commit()
    with Session(engine) as s:
        found = {v.check for v in run_checks(s, only=CHECKS)}
    assert check in found


def test_ledger_check_catches_a_refund_without_its_credit_note(
    engine: Any, make_user: Any, clock: Any
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = paid_order(engine, u, now, sku=H100, key="m")
    _cancel(engine, u, order.id or 0, now)
    with Session(engine) as s:
        s.exec(text("DELETE FROM credit_note_lines"))  # type: ignore[call-overload]
        s.exec(text("DELETE FROM credit_notes"))  # type: ignore[call-overload]
        s.exec(text("UPDATE credit_note_counters SET last_number = 0"))  # type: ignore[call-overload]
        s.commit()
    with Session(engine) as s:
        found = [v for v in run_checks(s, only=CHECKS)]
    assert [v.check for v in found] == ["credit_note_per_refund"]


# --- PostgreSQL: concurrent refunds and replays ---------------------------------------------


def test_concurrent_refunds_and_replays_issue_one_note_each_gap_free(
    pg_url: str, clock: Any
) -> None:
    """Orders of several customers cancelled at once on PostgreSQL, each by two requests
    racing (a double click, two tabs), some refunds rolled back halfway: one credit note per
    refund that committed, numbered 1..N with no gap, and ``ledger check`` holds."""
    import threading

    from app.db import make_engine

    now = clock.now()
    engine = make_engine(pg_url, pool_size=20)
    try:
        _stock(engine, now, n=8)
        made: list[tuple[User, Order]] = []
        for i in range(8):
            with Session(engine, expire_on_commit=False) as s:
                u = User(email=f"cn{i}@example.com", password_hash="x", created_at=now)
                s.add(u)
                s.commit()
            made.append((u, paid_order(engine, u, now, sku=H100, key=f"cn{i}")))
        barrier = threading.Barrier(16)
        errors: list[BaseException] = []

        def cancel(i: int, attempt: int) -> None:
            user, order = made[i]
            barrier.wait()
            try:
                with Session(engine) as s:
                    u = s.get(User, user.id)
                    assert u is not None
                    orders.cancel_order(s, user=u, order_id=order.id or 0, now=now)
                    if i % 4 == 3 and attempt == 0:
                        s.rollback()  # a refund that failed halfway: its number goes back
                        return
                    s.commit()
            except Exception as e:  # noqa: BLE001 - the assertion below shows it
                errors.append(e)

        threads = [threading.Thread(target=cancel, args=(i, a)) for i in range(8) for a in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        # a racing request may be refused as busy (503 on the page); none may double-refund
        from sqlalchemy.exc import OperationalError

        assert all(isinstance(e, OperationalError) for e in errors), errors
        with Session(engine) as s:
            notes = list(s.exec(select(CreditNote).order_by(col(CreditNote.seq))).all())
            voids = list(s.exec(select(JournalEntry).where(JournalEntry.kind == "hold_void")).all())
            assert len(notes) == len(voids) and len({n.order_id for n in notes}) == len(notes)
            assert [n.seq for n in notes] == list(range(1, len(notes) + 1))
            assert len(notes) >= 6  # every order but those whose only commit was rolled back
            assert run_checks(s, only=CHECKS) == []
        # replaying every refund now issues nothing
        for user, order in made:
            with Session(engine) as s:
                u = s.get(User, user.id)
                assert u is not None
                orders.cancel_order(s, user=u, order_id=order.id or 0, now=now)
                s.commit()
        with Session(engine) as s:
            again = s.exec(select(CreditNote)).all()
            assert len(again) == len(notes)
    finally:
        engine.dispose()
