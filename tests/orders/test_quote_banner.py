"""Issue 19, defect 9 (part): /deploy opened from a quote says so, with the quoted term."""

from __future__ import annotations

from tests.orders.test_quote_checkout import make_quote


def test_deploy_from_a_quote_names_the_quote_and_its_term(
    client, engine, clock, make_user, login, stock
) -> None:  # type: ignore[no-untyped-def]
    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    login(client, make_user())
    page = client.get("/deploy", params={"quote": token}).text
    assert 'id="from-quote"' in page
    assert "Prefilled from your sizing" not in page
    assert "Prefilled from quote Q-0" in page and "Quoted term:" in page
    client.cookies.set("lang", "zh_CN")
    page = client.get("/deploy", params={"quote": token}).text
    assert "已按报价 Q-0" in page and "报价期限" in page
