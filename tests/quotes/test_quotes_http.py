"""Quotes through HTTP: builder, discount approval, share link, expiry, checkout seam, PDF."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader
from sqlmodel import Session, col, select

from app.accounts.audit import AuditEvent
from app.accounts.models import User
from app.clock import FixedClock
from app.quotes import service
from app.quotes.models import ClusterRequest, Quote
from app.quotes.pdf import pdf_language

from .conftest import BASE_FORM

B200_LIST = 3_490_000  # catalog list price, cents per node per month


def _quote(session: Session, qid: int) -> Quote:
    session.expire_all()
    q = session.get(Quote, qid)
    assert q is not None
    session.commit()  # end the read: SQLite writers (the app) must not wait on us
    return q


def _audit(session: Session, qid: int) -> list[AuditEvent]:
    session.expire_all()
    events = list(
        session.exec(
            select(AuditEvent)
            .where(AuditEvent.target == f"quote:{qid}")
            .order_by(col(AuditEvent.id))
        ).all()
    )
    session.commit()
    return events


def _terms(session: Session, token: str, now: Any) -> service.QuoteTerms | None:
    terms = service.quote_for_checkout(session, token, now)
    session.commit()
    return terms


def _send(c: TestClient, qid: int) -> None:
    r = c.post(f"/staff/quotes/{qid}/send")
    assert r.status_code == 303


# ----------------------------------------------------------------------------- builder


def test_builder_freezes_list_price_and_computes_totals(
    build_quote: Callable[..., int], session: Session, sales: User
) -> None:
    qid = build_quote()
    q = _quote(session, qid)
    assert q.status == "draft"
    assert q.list_unit_price_cents == B200_LIST
    assert q.discount_bp == 1000
    assert q.unit_price_cents == 3_141_000
    assert q.total_cents == 3_141_000 * 2 * 3
    assert q.created_by_id == sales.id
    assert len(q.token) >= 32
    assert [e.action for e in _audit(session, qid)] == ["quote.created"]


def test_builder_errors_rerender_with_what_was_typed(
    sales_client: TestClient, session: Session
) -> None:
    form = {**BASE_FORM, "prospect_email": "nope", "quantity": "0", "discount": "60", "months": "x"}
    r = sales_client.post("/staff/quotes/new", data=form)
    assert r.status_code == 422
    assert 'id="e-prospect_email"' in r.text
    assert 'id="e-quantity"' in r.text
    assert 'id="e-discount"' in r.text
    assert 'id="e-months"' in r.text
    assert 'value="Example Labs"' in r.text
    assert session.exec(select(Quote)).first() is None


def test_gb300_term_must_be_whole_racks_and_12_to_36_months(
    sales_client: TestClient, build_quote: Callable[..., int], session: Session
) -> None:
    r = sales_client.post(
        "/staff/quotes/new",
        data={**BASE_FORM, "sku": "gb300-nvl72", "quantity": "80", "months": "6"},
    )
    assert r.status_code == 422
    assert "whole racks" in r.text and "12 to 36 months" in r.text
    qid = build_quote(sku="gb300-nvl72", quantity="144", months="24", discount="5")
    q = _quote(session, qid)
    assert q.kind == "rack"
    assert q.list_unit_price_cents == 799_000  # US$7,990 per GPU per month
    assert q.monthly_total_cents == round(799_000 * 0.95) * 144
    assert not q.promise_available  # a term contract: talk to sales


def test_sizing_link_is_sized_on_the_quoted_configuration(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    qid = build_quote(sizing="https://example.test/size?model=llama-3.1-8b&tokens=1T")
    q = _quote(session, qid)
    summary = json.loads(q.sizing_summary_json)
    assert summary["fits"] is True and summary["training_days"] > 0
    assert q.note_model_size.endswith("params") and q.note_token_budget == "1T tokens"
    assert "model=llama-3.1-8b" in q.sizing_query
    page = sales_client.get(f"/staff/quotes/{qid}").text
    assert "Estimated training time" in page
    bad = sales_client.post("/staff/quotes/new", data={**BASE_FORM, "sizing": "/size?tokens=lots"})
    assert bad.status_code == 422 and 'id="e-sizing"' in bad.text


def test_existing_customer_is_recognised_by_email(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    make_user: Callable[..., User],
    session: Session,
) -> None:
    cust = make_user(email="buyer@corp.test")
    frag = sales_client.get("/staff/quotes/customers", params={"prospect_email": "buyer@"})
    assert "buyer@corp.test" in frag.text
    qid = build_quote(prospect_email="Buyer@Corp.test")
    assert _quote(session, qid).customer_user_id == cust.id


# ----------------------------------------------------------------------------- approval


def test_ten_percent_is_within_the_sales_limit(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    qid = build_quote(discount="10")
    _send(sales_client, qid)
    q = _quote(session, qid)
    assert q.status == "sent"
    assert q.expires_at is not None and q.approved_by_id is None


def test_fifteen_percent_waits_for_ops_and_only_ops_can_approve(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    login: Any,
    ops: User,
    make_user: Callable[..., User],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(discount="15")
    _send(sales_client, qid)
    q = _quote(session, qid)
    assert q.status == "pending_approval"
    token = q.token
    # Not shared yet: the link does not work, checkout does not honour it.
    anon = new_client()
    assert anon.get(f"/q/{token}").status_code == 404
    assert _terms(session, token, clock.now()) is None
    # Sales (even another sales person) cannot approve.
    r = sales_client.post(f"/staff/quotes/{qid}/approve", data={"reason": "big deal"})
    assert r.status_code == 403
    other_sales = login(new_client(), make_user(role="sales"))
    assert other_sales.post(f"/staff/quotes/{qid}/approve", data={"reason": "x"}).status_code == 403
    # A customer cannot either.
    cust = login(new_client(), make_user())
    assert cust.post(f"/staff/quotes/{qid}/approve", data={"reason": "x"}).status_code == 403
    assert _quote(session, qid).status == "pending_approval"
    # Ops must give a reason.
    ops_c = login(new_client(), ops)
    r = ops_c.post(f"/staff/quotes/{qid}/approve", data={"reason": "  "})
    assert r.status_code == 422
    assert _quote(session, qid).status == "pending_approval"
    clock.advance(timedelta(hours=2))
    r = ops_c.post(
        f"/staff/quotes/{qid}/approve",
        data={"reason": "Three-month commitment", "decision": "approve"},
    )
    assert r.status_code == 303
    q = _quote(session, qid)
    assert q.status == "sent"
    assert q.approved_by_id == ops.id
    assert q.approved_at is not None and q.approved_at.replace(tzinfo=None) == clock.now().replace(
        tzinfo=None
    )
    assert q.approval_reason == "Three-month commitment"
    assert q.approved_discount_bp == 1500
    events = _audit(session, qid)
    assert [e.action for e in events] == [
        "quote.created",
        "quote.approval_requested",
        "quote.approved",
        # the public link now works
    ]
    approved = events[-1]
    assert approved.actor_id == ops.id
    assert json.loads(approved.details)["reason"] == "Three-month commitment"
    assert token not in approved.details
    page = sales_client.get(f"/staff/quotes/{qid}").text
    assert "Three-month commitment" in page and ops.email in page
    assert anon.get(f"/q/{token}").status_code == 200


def test_ops_can_decline_back_to_draft(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    login: Any,
    ops: User,
    session: Session,
) -> None:
    qid = build_quote(discount="20")
    _send(sales_client, qid)
    ops_c = login(new_client(), ops)
    r = ops_c.post(
        f"/staff/quotes/{qid}/approve", data={"reason": "too deep", "decision": "decline"}
    )
    assert r.status_code == 303
    q = _quote(session, qid)
    assert q.status == "draft" and q.approved_by_id is None
    # Editing the discount down to the limit lets sales send it themselves.
    r = sales_client.post(f"/staff/quotes/{qid}/edit", data={**BASE_FORM, "discount": "10"})
    assert r.status_code == 303
    _send(sales_client, qid)
    assert _quote(session, qid).status == "sent"


# ----------------------------------------------------------------------------- share link


def test_prospect_views_accepts_and_lands_on_deploy_with_the_quoted_price(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(sizing="/size?model=llama-3.1-8b&tokens=1T", discount="10")
    _send(sales_client, qid)
    token = _quote(session, qid).token
    # Sales checking the page does not count as the prospect's view.
    assert sales_client.get(f"/q/{token}").status_code == 200
    assert _quote(session, qid).status == "sent"
    prospect = new_client()  # logged out, another browser
    r = prospect.get(f"/q/{token}")
    assert r.status_code == 200
    assert "$62,820.00" in r.text  # 2 × US$31,410 per month
    assert "not a reservation" in r.text
    assert r.headers["cache-control"] == "no-store"
    q = _quote(session, qid)
    assert q.status == "viewed" and q.viewed_at is not None
    clock.advance(timedelta(days=1))
    r = prospect.post(f"/q/{token}/accept")
    assert r.status_code == 303
    target = urlsplit(r.headers["location"])
    assert target.path == "/deploy"
    params = parse_qs(target.query)
    assert params["sku"] == ["hgx-b200"] and params["nodes"] == ["2"]
    assert params["quote"] == [token]
    assert params["note_node_count"] == ["2"] and params["note_private_network"] == ["1"]
    assert params["note_token_budget"] == ["1T tokens"]
    assert "optimizer state sharded over all GPUs" in params["note_comm_pattern"][0]
    assert "model=llama-3.1-8b" in params["sizing"][0]
    assert params["image"][0].startswith("ubuntu")
    assert _quote(session, qid).status == "accepted"
    terms = _terms(session, token, clock.now())
    assert terms is not None
    assert terms.unit_price_cents == 3_141_000  # US$34,900 − 10 %
    assert (terms.sku_id, terms.quantity, terms.months) == ("hgx-b200", 2, 3)
    # Accepting again is harmless.
    assert prospect.post(f"/q/{token}/accept").status_code == 303
    # mark_used: one quote, one order.
    service.mark_used(session, terms.quote_id, 101, clock.now())
    service.mark_used(session, terms.quote_id, 101, clock.now())
    try:
        service.mark_used(session, terms.quote_id, 102, clock.now())
    except service.QuoteAlreadyUsed:
        pass
    else:  # pragma: no cover
        raise AssertionError("a quote must not serve two orders")


def test_deploy_page_honours_the_quoted_price(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(discount="10", quantity="1", months="1")
    _send(sales_client, qid)
    token = _quote(session, qid).token
    prospect = new_client()
    r = prospect.post(f"/q/{token}/accept")
    page = prospect.get(r.headers["location"])
    assert page.status_code == 200
    assert "$31,410.00" in page.text  # US$34,900 list − 10 %
    # Past expiry the deploy page falls back to the list price.
    clock.advance(timedelta(days=8))
    later = prospect.get(r.headers["location"])
    assert later.status_code == 200
    assert "$31,410.00" not in later.text and "$34,900.00" in later.text


def test_expired_quote_cannot_be_accepted_or_honoured(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(valid_days="7")
    _send(sales_client, qid)
    token = _quote(session, qid).token
    prospect = new_client()
    clock.advance(timedelta(days=7))
    assert _terms(session, token, clock.now()) is not None  # last instant
    clock.advance(timedelta(seconds=1))
    r = prospect.get(f"/q/{token}")
    assert r.status_code == 200 and "This quote has expired" in r.text
    q = _quote(session, qid)
    assert q.status == "expired" and q.expired_at is not None  # stored when observed
    r = prospect.post(f"/q/{token}/accept")
    assert r.status_code == 410
    assert _quote(session, qid).status == "expired"
    assert _terms(session, token, clock.now()) is None
    # The desk lists it under expired.
    listing = sales_client.get("/staff/quotes", params={"status": "expired"}).text
    assert f"/staff/quotes/{qid}" in listing


def test_accepted_quote_price_lapses_at_expiry(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(valid_days="3")
    _send(sales_client, qid)
    token = _quote(session, qid).token
    new_client().post(f"/q/{token}/accept")
    clock.advance(timedelta(days=3, seconds=1))
    assert _terms(session, token, clock.now()) is None
    assert _quote(session, qid).status == "accepted"  # history is kept


def test_gb300_acceptance_is_a_sales_conversation(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote(sku="gb300-nvl72", quantity="72", months="12", discount="0")
    _send(sales_client, qid)
    token = _quote(session, qid).token
    prospect = new_client()
    r = prospect.post(f"/q/{token}/accept")
    assert r.status_code == 303 and r.headers["location"] == f"/q/{token}"
    page = prospect.get(f"/q/{token}").text
    assert "sign the term contract" in page
    assert 'href="/deploy?' not in page
    assert _terms(session, token, clock.now()) is None


def test_withdrawn_quote_link_is_dead(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
    clock: FixedClock,
) -> None:
    qid = build_quote()
    _send(sales_client, qid)
    token = _quote(session, qid).token
    assert sales_client.post(f"/staff/quotes/{qid}/withdraw").status_code == 303
    assert new_client().get(f"/q/{token}").status_code == 404
    assert _terms(session, token, clock.now()) is None


# ----------------------------------------------------------------------------- authorization


def test_customers_and_visitors_cannot_reach_the_desk(
    build_quote: Callable[..., int],
    new_client: Callable[[], TestClient],
    login: Any,
    make_user: Callable[..., User],
) -> None:
    qid = build_quote()
    cust = login(new_client(), make_user())
    for path in (
        "/staff/quotes",
        "/staff/quotes/new",
        f"/staff/quotes/{qid}",
        f"/staff/quotes/{qid}/pdf",
        "/staff/quotes/requests",
    ):
        assert cust.get(path).status_code == 403, path
    assert cust.post("/staff/quotes/new", data=BASE_FORM).status_code == 403
    assert cust.post(f"/staff/quotes/{qid}/send").status_code == 403
    anon = new_client()
    r = anon.get("/staff/quotes")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_a_link_shows_only_its_quote_and_wrong_tokens_404(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
) -> None:
    a = build_quote(prospect_company="Alpha Corp")
    b = build_quote(prospect_company="Beta Corp")
    _send(sales_client, a)
    _send(sales_client, b)
    token_a = _quote(session, a).token
    prospect = new_client()
    page = prospect.get(f"/q/{token_a}").text
    assert "Alpha Corp" in page and "Beta Corp" not in page
    assert "/staff/" not in page
    wrong = token_a[:-1] + ("y" if token_a.endswith("x") else "x")  # one character off
    assert prospect.get(f"/q/{wrong}").status_code == 404
    assert prospect.get("/q/" + "A" * 32).status_code == 404
    assert prospect.post("/q/" + "A" * 32 + "/accept").status_code == 404
    assert prospect.get(f"/q/{token_a}x/pdf").status_code == 404
    # The prospect's link does not open the staff pages.
    assert prospect.get(f"/staff/quotes/{a}").status_code == 303


def test_accept_needs_the_csrf_token(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    raw_client: TestClient,
    session: Session,
) -> None:
    qid = build_quote()
    _send(sales_client, qid)
    token = _quote(session, qid).token
    r = raw_client.post(f"/q/{token}/accept")
    assert r.status_code == 403
    assert _quote(session, qid).status == "sent"


# ----------------------------------------------------------------------------- PDF


def test_pdf_download_contains_the_total(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
) -> None:
    qid = build_quote(sizing="/size?model=llama-3.1-8b&tokens=1T")
    r = sales_client.get(f"/staff/quotes/{qid}/pdf")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/pdf"
    assert r.content.startswith(b"%PDF")
    assert b"USD 188,460.00" in r.content  # 2 nodes × 3 months × US$31,410
    assert "quote.pdf_downloaded" in [e.action for e in _audit(session, qid)]
    # Chinese: a CJK font if installed, else English (and the PDF says so).
    sales_client.cookies.set("lang", "zh_CN")
    zh = sales_client.get(f"/staff/quotes/{qid}/pdf")
    assert zh.status_code == 200 and zh.content.startswith(b"%PDF")
    assert b"USD 188,460.00" in zh.content
    if pdf_language("zh_CN") == "zh_CN":
        # readable text: the amounts after a bold Chinese label keep their font
        text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(zh.content)).pages)
        assert "每月合计" in text and "US$62,820.00" in text and "US$188,460.00" in text
    # The prospect can download it from the link once shared.
    _send(sales_client, qid)
    token = _quote(session, qid).token
    pub = new_client().get(f"/q/{token}/pdf")
    assert pub.status_code == 200 and pub.content.startswith(b"%PDF")


# ----------------------------------------------------------------------------- desk


def test_list_filters_searches_and_paginates(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    ids = [
        build_quote(prospect_email=f"p{i}@acme.test", prospect_company="Acme") for i in range(26)
    ]
    other = build_quote(prospect_email="x@zeta.test", prospect_company="Zeta AI")
    _send(sales_client, other)
    first = sales_client.get("/staff/quotes").text
    assert "Page 1 of 2" in first
    second = sales_client.get("/staff/quotes", params={"page": 2}).text
    assert f'/staff/quotes/{ids[0]}"' in second
    zeta = sales_client.get("/staff/quotes", params={"q": "zeta"}).text
    assert f'/staff/quotes/{other}"' in zeta and f'/staff/quotes/{ids[0]}"' not in zeta
    by_ref = sales_client.get("/staff/quotes", params={"q": f"Q-{ids[3]:06d}"}).text
    assert f'/staff/quotes/{ids[3]}"' in by_ref and "Page 1 of 1" in by_ref
    sent = sales_client.get("/staff/quotes", params={"status": "sent"}).text
    assert f'/staff/quotes/{other}"' in sent and f'/staff/quotes/{ids[1]}"' not in sent


def test_cluster_requests_queue(
    sales_client: TestClient, session: Session, clock: FixedClock, sales: User
) -> None:
    rr = ClusterRequest(
        sku_id="gb300-nvl72",
        nodes=2,
        months=24,
        sizing_query="model=llama-3.1-405b&tokens=15T",
        start_date=clock.now().date() + timedelta(days=60),
        workload="Pretraining a 400B MoE",
        name="Ana",
        email="ana@frontier.test",
        company="Frontier",
        created_at=clock.now(),
    )
    session.add(rr)
    session.commit()
    listing = sales_client.get("/staff/quotes").text
    assert "1 new" in listing
    page = sales_client.get("/staff/quotes/requests").text
    assert "Frontier" in page and "Pretraining a 400B MoE" in page
    assert 'href="/size?model=llama-3.1-405b&amp;tokens=15T"' in page
    r = sales_client.post(
        f"/staff/quotes/requests/{rr.id}", data={"status": "contacted", "staff_note": "called"}
    )
    assert r.status_code == 303
    session.expire_all()
    got = session.get(ClusterRequest, rr.id)
    assert got is not None and got.status == "contacted" and got.staff_note == "called"
    session.commit()
    assert (
        sales_client.post(f"/staff/quotes/requests/{rr.id}", data={"status": "bogus"}).status_code
        == 422
    )
    # Build a quote from it: the builder is prefilled, and saving marks the request quoted.
    form = sales_client.get(f"/staff/quotes/new?from_request={rr.id}").text
    assert 'value="ana@frontier.test"' in form and 'value="144"' in form
    r = sales_client.post(
        "/staff/quotes/new",
        data={
            **BASE_FORM,
            "sku": "gb300-nvl72",
            "quantity": "144",
            "months": "24",
            "prospect_email": "ana@frontier.test",
            "from_request": str(rr.id),
        },
    )
    assert r.status_code == 303
    session.expire_all()
    got = session.get(ClusterRequest, rr.id)
    assert got is not None and got.status == "quoted"
    actions = [
        e.action
        for e in session.exec(
            select(AuditEvent).where(AuditEvent.target == f"cluster_request:{rr.id}")
        )
    ]
    assert actions == ["cluster_request.status", "cluster_request.status"]


def test_seed_is_idempotent(
    session: Session, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    from app.quotes.seed import seed

    make_user(role="sales", email="sales@demo.test")
    lines = seed(session, clock.now())
    session.commit()
    assert lines
    assert seed(session, clock.now()) == []
    quotes = session.exec(select(Quote)).all()
    assert sorted(q.status for q in quotes) == ["pending_approval", "sent"]


def test_pages_carry_a_csrf_token_and_read_in_chinese(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
) -> None:
    import re

    qid = build_quote()
    form = sales_client.get("/staff/quotes/new").text
    assert re.search(r'name="csrf_token" value="[^"]+"', form)
    _send(sales_client, qid)
    token = _quote(session, qid).token
    prospect = new_client()
    prospect.cookies.set("lang", "zh_CN")
    page = prospect.get(f"/q/{token}").text
    assert re.search(r'name="csrf_token" value="[^"]+"', page)
    assert "接受此报价" in page and "这只是预估，并非预留" in page
    assert "US$188,460.00" in page
    sales_client.cookies.set("lang", "zh_CN")
    desk = sales_client.get("/staff/quotes").text
    assert "销售报价" in desk and "已查看" in desk


def test_request_status_changes_in_place_with_htmx(
    sales_client: TestClient, session: Session, clock: FixedClock
) -> None:
    rr = ClusterRequest(
        sku_id="hgx-h100",
        nodes=40,
        months=12,
        start_date=clock.now().date(),
        workload="Long-context pretraining",
        email="a@b.test",
        created_at=clock.now(),
    )
    session.add(rr)
    session.commit()
    r = sales_client.post(
        f"/staff/quotes/requests/{rr.id}",
        data={"status": "closed", "staff_note": "went elsewhere"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200
    assert f'id="request-{rr.id}"' in r.text and "Saved." in r.text
    session.expire_all()
    got = session.get(ClusterRequest, rr.id)
    assert got is not None and got.status == "closed"


def test_list_price_is_frozen_on_the_quote(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    session: Session,
    clock: FixedClock,
) -> None:
    from app.catalog.models import ListPrice

    qid = build_quote(discount="0", quantity="1", months="1")
    session.add(ListPrice(sku_id="hgx-b200", cents=3_990_000, updated_at=clock.now()))
    session.commit()
    # Edits keep the frozen list price while the SKU stays the same.
    r = sales_client.post(
        f"/staff/quotes/{qid}/edit",
        data={**BASE_FORM, "discount": "0", "quantity": "1", "months": "2"},
    )
    assert r.status_code == 303
    _send(sales_client, qid)
    q = _quote(session, qid)
    assert q.list_unit_price_cents == B200_LIST and q.total_cents == B200_LIST * 2
    terms = _terms(session, q.token, clock.now())
    assert terms is not None and terms.unit_price_cents == B200_LIST
    # A new quote reads the new list price.
    assert _quote(session, build_quote(discount="0")).list_unit_price_cents == 3_990_000


def test_builder_numbers_follow_the_number_rule(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    qid = build_quote(quantity="２", months="３", discount="5")
    q = _quote(session, qid)
    assert (q.quantity, q.months, q.discount_bp) == (2, 3, 500)
    r = sales_client.post("/staff/quotes/new", data={**BASE_FORM, "quantity": "2²"})
    assert r.status_code == 422 and 'id="e-quantity"' in r.text


def test_english_pdf_prints_a_chinese_customer_name(
    build_quote: Callable[..., int], sales_client: TestClient
) -> None:
    """Issue 19, defect 9: the English PDF keeps the Chinese characters of the name."""
    import io
    from pathlib import Path

    from pypdf import PdfReader

    cjk = Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")
    if not (cjk.exists() and Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists()):
        pytest.skip("needs DejaVu and fonts-droid-fallback")
    qid = build_quote(prospect_name="张伟", prospect_company="深圳算力科技")
    sales_client.cookies.set("lang", "en")
    r = sales_client.get(f"/staff/quotes/{qid}/pdf")
    assert r.status_code == 200
    text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(r.content)).pages)
    assert "张伟" in text and "深圳算力科技" in text
    assert "Prepared for" in text  # still the English PDF
    # plural forms (defect 7), read from a quote without the fallback font in play
    other = build_quote(prospect_name="Lin Wei", prospect_company="Acme")
    body = sales_client.get(f"/staff/quotes/{other}/pdf").content
    text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(body)).pages)
    assert "3 months" in text and "month(s)" not in text


def test_a_draft_valid_for_one_day_reads_day_not_days(
    build_quote: Callable[..., int], sales_client: TestClient
) -> None:
    """The draft's validity is a counted phrase: "1 day after it is sent", "7 days …"."""
    one = sales_client.get(f"/staff/quotes/{build_quote(valid_days='1')}").text
    assert "1 day after it is sent" in one and "1 days" not in one
    seven = sales_client.get(f"/staff/quotes/{build_quote(valid_days='7')}").text
    assert "7 days after it is sent" in seven
    sales_client.cookies.set("lang", "zh_CN")
    zh = sales_client.get(f"/staff/quotes/{build_quote(valid_days='1')}").text
    assert "发送后 1 天内有效" in zh


def test_a_bad_number_in_the_builder_says_what_is_allowed(sales_client: TestClient) -> None:
    """Quantity -1 and valid days -3 read "Enter a whole number." (they are whole numbers)
    and months "١٢" the same: each now says the range or the digits."""
    from tests.quotes.conftest import BASE_FORM

    cases = {
        "quantity": ("-1", "Quote between 1 and 16 nodes"),
        "months": ("-3", "Quote between 1 and 36 months."),
        "valid_days": ("-3", "A quote is valid for 1 to 30 days."),
    }
    for field, (value, message) in cases.items():
        r = sales_client.post("/staff/quotes/new", data={**BASE_FORM, field: value})
        assert r.status_code == 422 and message in r.text, field
    r = sales_client.post("/staff/quotes/new", data={**BASE_FORM, "months": "١٢"})
    assert r.status_code == 422 and "Enter a number using the digits 0–9." in r.text
