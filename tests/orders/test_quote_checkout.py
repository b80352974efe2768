"""A sales quote's unit price is honoured at checkout until the quote expires."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlmodel import Session

from app.orders.models import Order
from tests.orders.conftest import deploy_form, form_value

B200 = 3_490_000


def make_quote(engine: Any, clock: Any, make_user: Any, discount_bp: int = 500) -> str:
    from app.quotes import service as quotes

    sales = make_user(role="sales")
    with Session(engine, expire_on_commit=False) as s:
        q = quotes.create_quote(
            s,
            actor=sales,
            data=quotes.QuoteInput(
                prospect_name="Ada",
                prospect_email="ada@example.com",
                prospect_company="Lab",
                sku_id="hgx-b200",
                quantity=1,
                months=1,
                discount_bp=discount_bp,
                valid_days=7,
                sizing_query="",
                sizing_notes="",
                notes="",
            ),
            now=clock.now(),
        )
        quotes.send_quote(s, q, actor=sales, now=clock.now())
        s.commit()
        return q.token


def test_quoted_price_until_expiry(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    u = make_user()
    fund(u, 2 * B200)
    login(client, u)
    quoted = B200 * 95 // 100
    r = client.get("/deploy", params={"quote": token})
    assert 'value="hgx-b200" selected' in r.text and "Quoted price, valid until" in r.text
    data = deploy_form(client, quote=token)
    r = client.post("/deploy", data=data)
    assert r.status_code == 303
    oid = int(r.headers["location"].split("/")[2])
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None and o.unit_price_cents == quoted and o.quote_id is not None

    # The quote runs out before the customer pays: the list price applies, shown first.
    page = client.get(f"/orders/{oid}/review").text
    assert "the lease is billed monthly at the quoted price" in page  # the quote's rules
    form = {
        "idempotency_key": form_value(page, "idempotency_key"),
        "promise_date": form_value(page, "promise_date"),
    }
    clock.advance(timedelta(days=8))
    page = client.get(f"/orders/{oid}/review").text
    form["promise_date"] = form_value(page, "promise_date")
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 409 and "quoted price expired" in r.text
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None and o.unit_price_cents == B200 and o.status == "awaiting_payment"
    assert balances(u) == (2 * B200, 0)
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 303
    assert balances(u) == (B200, B200)
    ledger_ok()


def test_quote_pays_at_the_quoted_price_and_only_once(
    client, engine, clock, make_user, login, stock, fund, balances
) -> None:
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    u = make_user()
    fund(u, 2 * B200)
    login(client, u)
    quoted = B200 * 95 // 100
    r = client.post("/deploy", data=deploy_form(client, quote=token))
    oid = int(r.headers["location"].split("/")[2])
    page = client.get(f"/orders/{oid}/review").text
    r = client.post(
        f"/orders/{oid}/pay",
        data={
            "idempotency_key": form_value(page, "idempotency_key"),
            "promise_date": form_value(page, "promise_date"),
        },
    )
    assert r.status_code == 303
    assert balances(u) == (2 * B200 - quoted, quoted)
    # The same quote link for a second order: list price (one quote, one order).
    r = client.post("/deploy", data=deploy_form(client, quote=token))
    oid2 = int(r.headers["location"].split("/")[2])
    with Session(engine) as s:
        o2 = s.get(Order, oid2)
        assert o2 is not None and o2.unit_price_cents == B200 and o2.quote_id is None
    # ...and the review page says why the quoted price is not there
    assert "does not apply to this order" in client.get(f"/orders/{oid2}/review").text


def test_an_unknown_quote_link_says_the_list_price_applies(client, make_user, login, stock) -> None:
    stock("hgx-b200", 1)
    login(client, make_user())
    r = client.post("/deploy", data=deploy_form(client, quote="bogus-token"))
    assert r.status_code == 303
    review = client.get(r.headers["location"]).text
    assert "does not apply to this order" in review and "list price applies" in review
    r = client.post("/deploy", data=deploy_form(client))  # no quote: no such message
    assert "does not apply" not in client.get(r.headers["location"]).text


def test_deploy_from_a_quote_prefills_the_prospect_and_states_the_terms(
    client, engine, clock, make_user, stock
) -> None:
    """Issue 19, defect 9: signed out, /deploy from a quote carries the prospect's email,
    the quoted term, that renewals keep the discount, and node names (not SKU ids)."""
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    page = client.get("/deploy", params={"quote": token}).text
    assert 'value="ada@example.com"' in page  # the inline sign-up step
    assert "Prefilled from quote Q-" in page and "Quoted term: 1 month." in page
    quoted = f"{B200 * 95 // 100 // 100:,}"
    assert "Monthly renewals keep the quoted price of" in page and quoted in page
    # Another configuration than quoted: the note names the node, not its id.
    other = client.get(
        "/deploy/summary",
        params={"quote": token, "sku": "hgx-b200", "nodes": "2"},
        headers={"HX-Request": "true"},
    )
    assert "1 × HGX B200" in other.text and "hgx-b200;" not in other.text
    assert "1 × hgx-b200" not in other.text
    client.cookies.set("lang", "zh_CN")
    zh = client.get("/deploy", params={"quote": token}).text
    assert "每月续费沿用报价中的价格" in zh


RULES = (
    "The quoted price holds for an order paid before the quote expires or is withdrawn; "
    "after that, checkout charges the list price. The term is the planned length, not a "
    "commitment: the lease is billed monthly at the quoted price and can be cancelled free "
    "in any month."
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_quote_rules_read_the_same_everywhere_and_withdrawal_voids_the_price(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    import io

    from pypdf import PdfReader
    from sqlmodel import select

    from app.quotes import service as quotes
    from app.quotes.models import Quote

    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    share = client.get(f"/q/{token}").text
    assert RULES in _one_line(share)
    pdf = client.get(f"/q/{token}/pdf")
    assert pdf.status_code == 200
    text = _one_line(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.content)).pages))
    assert RULES in text
    u = make_user()
    fund(u, 2 * B200)
    login(client, u)
    assert RULES in _one_line(client.get("/deploy", params={"quote": token}).text)
    r = client.post("/deploy", data=deploy_form(client, quote=token))
    oid = int(r.headers["location"].split("/")[2])
    page = client.get(f"/orders/{oid}/review").text
    assert RULES in _one_line(page)
    form = {
        "idempotency_key": form_value(page, "idempotency_key"),
        "promise_date": form_value(page, "promise_date"),
    }
    # Sales withdraws the quote before the customer pays: the list price applies.
    sales = make_user(role="sales")
    with Session(engine) as s:
        q = s.exec(select(Quote).where(Quote.token == token)).one()
        quotes.withdraw_quote(s, q, actor=sales, now=clock.now())
        s.commit()
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 409 and "Sales withdrew the quote" in r.text
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None and o.unit_price_cents == B200 and o.status == "awaiting_payment"
    assert balances(u) == (2 * B200, 0)  # nothing charged at the quoted price
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 303
    assert balances(u) == (B200, B200)
    ledger_ok()


def test_quote_rules_in_chinese(client, engine, clock, make_user, stock) -> None:
    stock("hgx-b200", 1)
    token = make_quote(engine, clock, make_user)
    client.cookies.set("lang", "zh_CN")
    zh_rule = "报价价格适用于在报价过期或撤回之前付款的订单"
    assert zh_rule in client.get(f"/q/{token}").text
    assert zh_rule in client.get("/deploy", params={"quote": token}).text


def _order_id(r: Any) -> int:
    assert r.status_code == 303, r.text[:500]
    return int(r.headers["location"].split("/")[2])


def test_a_discarded_unpaid_order_frees_its_quote_for_the_prospect(
    client, new_client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    """Anyone with the link could place an order from it and throw the order away, and
    the prospect then got the list price ("used for another order")."""
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    quoted = B200 * 95 // 100
    stranger = make_user()
    login(client, stranger)
    taken = _order_id(client.post("/deploy", data=deploy_form(client, quote=token)))
    # while that order stands, the link's summary says the quote is used, not its price
    other = new_client()
    login(other, make_user())
    summary = other.get(
        "/deploy/summary",
        params={"sku": "hgx-b200", "nodes": 1, "quote": token},
        headers={"HX-Request": "true"},
    )
    assert "already used for another order" in summary.text
    r = client.post(f"/orders/{taken}/cancel")
    assert r.status_code == 303
    with Session(engine) as s:
        o = s.get(Order, taken)
        assert o is not None and o.status == "abandoned"
    prospect = make_user()
    fund(prospect, B200)
    login(other, prospect)
    oid = _order_id(other.post("/deploy", data=deploy_form(other, quote=token)))
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None and o.unit_price_cents == quoted and o.quote_id is not None


def test_a_used_quote_says_so_and_the_holder_is_told_to_pay_their_own_order(
    client, new_client, engine, clock, make_user, login, stock
) -> None:
    """Once an order holds the quote, its page no longer offers the quoted price; its holder
    is pointed to their own unpaid order, not told it went to "another order"."""
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    holder = make_user()
    login(client, holder)
    oid = _order_id(client.post("/deploy", data=deploy_form(client, quote=token)))
    summary = client.get(
        "/deploy/summary",
        params={"sku": "hgx-b200", "nodes": 1, "quote": token},
        headers={"HX-Request": "true"},
    ).text
    assert f"Your order #{oid} holds this quote" in summary and "another order" not in summary
    page = new_client().get(f"/q/{token}").text
    assert "This quote has been used" in page and "Accept and continue to deploy" not in page
    assert "Continue to deploy" not in page


def test_the_review_page_shows_the_list_price_once_sales_withdrew_the_quote(
    client, engine, clock, make_user, login, stock
) -> None:
    from sqlmodel import select

    from app.quotes import service as quotes
    from app.quotes.models import Quote

    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    login(client, make_user())
    oid = _order_id(client.post("/deploy", data=deploy_form(client, quote=token)))
    quoted = B200 * 95 // 100
    assert f"Pay US${quoted / 100:,.2f}" in client.get(f"/orders/{oid}/review").text
    sales = make_user(role="sales")
    with Session(engine) as s:
        q = s.exec(select(Quote).where(Quote.token == token)).one()
        quotes.withdraw_quote(s, q, actor=sales, now=clock.now())
        s.commit()
    page = client.get(f"/orders/{oid}/review").text
    assert f"Pay US${B200 / 100:,.2f}" in page and "the quote expired or was withdrawn" in page


def test_paying_a_discarded_order_from_a_stale_tab_lands_on_its_page(
    client, engine, clock, make_user, login, stock, fund, balances
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = _order_id(client.post("/deploy", data=deploy_form(client)))
    page = client.get(f"/orders/{oid}/review").text  # the tab kept open
    assert client.post(f"/orders/{oid}/cancel").status_code == 303
    r = client.post(
        f"/orders/{oid}/pay",
        data={
            "idempotency_key": form_value(page, "idempotency_key"),
            "promise_date": form_value(page, "promise_date"),
        },
    )
    assert r.status_code == 303 and r.headers["location"].endswith(f"/orders/{oid}")
    assert "cannot be paid in its current state" in client.get(r.headers["location"]).text
    assert balances(u) == (B200, 0)
