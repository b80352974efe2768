"""Cluster requests: the sales path for any SKU, node count and term (quotes domain)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.clock import FixedClock
from app.quotes import service
from app.quotes.models import ClusterRequest
from tests.orders.conftest import deploy_form
from tests.orders.test_api import body, token_for

SIZING = "model=llama-3.1-70b&tokens=5T&deadline_days=30"


def good(**over: str) -> dict[str, str]:
    data = {
        "sku": "hgx-h100",
        "nodes": "40",
        "months": "6",
        "start_date": "2027-03-01",
        "workload": "Pretraining a 70B dense model on 5T tokens",
        "email": "Lab@Example.com",
        "name": "Ada",
        "company": "Example Labs",
        "sizing": SIZING,
    }
    data.update(over)
    return data


def rows(engine: Any) -> list[ClusterRequest]:
    with Session(engine) as s:
        return list(s.exec(select(ClusterRequest)).all())


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_form_is_prefilled_from_the_link(client: TestClient, lang: str) -> None:
    client.cookies.set("lang", lang)
    r = client.get(
        "/cluster-request",
        params={"sku": "hgx-b300", "nodes": "40", "months": "6", "sizing": SIZING},
    )
    assert r.status_code == 200
    t = r.text
    assert '<option value="hgx-b300" selected>' in t
    assert 'name="nodes" type="text" value="40"' in t
    assert '<option value="6" selected>' in t
    assert 'name="sizing" value="model=llama-3.1-70b&amp;tokens=5T&amp;deadline_days=30"' in t
    assert 'href="/size?model=llama-3.1-70b&amp;tokens=5T&amp;deadline_days=30"' in t
    if lang == "zh_CN":
        assert "与销售洽谈集群" in t


def test_any_sku_node_count_and_term_lands_in_the_sales_queue(
    new_client: Any, engine: Any, sales_client: TestClient
) -> None:
    r = new_client().post("/cluster-request", data=good())
    assert r.status_code == 303
    assert r.headers["location"] == "/size?" + SIZING
    (row,) = rows(engine)
    assert (row.sku_id, row.nodes, row.months, row.email, row.status) == (
        "hgx-h100",
        40,
        6,
        "lab@example.com",
        "new",
    )
    assert row.sizing_query == SIZING and row.user_id is None
    page = sales_client.get("/staff/quotes/requests").text
    assert "Example Labs" in page and "40 × HGX H100" in page and "320 GPUs" in page
    assert 'href="/size?model=llama-3.1-70b&amp;tokens=5T&amp;deadline_days=30"' in page
    assert "1 new" in sales_client.get("/staff/quotes").text


def test_full_width_digits_follow_the_number_rule(client: TestClient, engine: Any) -> None:
    r = client.post("/cluster-request", data=good(nodes="４０", sizing=""))
    assert r.status_code == 303 and r.headers["location"] == "/nodes/hgx-h100"
    (row,) = rows(engine)
    assert row.nodes == 40


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sku", "h9000"),
        ("nodes", "0"),
        ("nodes", "x"),
        ("nodes", "10001"),
        ("nodes", "4²"),
        ("months", "0"),
        ("months", "48"),
        ("start_date", "2020-01-01"),
        ("start_date", "2031-01-01"),
        ("start_date", "soon"),
        ("workload", "hi"),
        ("workload", "x" * 4001),
        ("email", "nope"),
        ("company", "c" * 121),
    ],
)
def test_bad_input_is_refused_next_to_the_field_and_changes_nothing(
    client: TestClient, engine: Any, field: str, value: str
) -> None:
    r = client.post("/cluster-request", data=good(**{field: value}))
    assert r.status_code == 422
    assert f'id="e-{field}"' in r.text
    if field not in ("sku", "months"):  # a select keeps its choices; text keeps what was typed
        assert value in r.text
    assert rows(engine) == []


def test_needs_csrf(raw_client: TestClient, engine: Any) -> None:
    assert raw_client.post("/cluster-request", data=good()).status_code == 403
    assert rows(engine) == []


def test_old_gb300_url_redirects(client: TestClient) -> None:
    r = client.get("/nodes/gb300-nvl72/request")
    assert r.status_code == 308
    assert r.headers["location"] == "/cluster-request?sku=gb300-nvl72"
    assert "/cluster-request?sku=gb300-nvl72" in client.get("/nodes/gb300-nvl72").text


def test_status_changes_only_through_the_service(
    session: Session, clock: FixedClock, make_user: Any
) -> None:
    from app.errors import InvalidInput
    from app.quotes.schemas import ClusterRequestIn

    staff = make_user(role="sales")
    data = ClusterRequestIn.model_validate(good(), context={"today": clock.now().date()})
    row = service.create_cluster_request(session, data, user_id=None, now=clock.now())
    assert row.id is not None
    with pytest.raises(InvalidInput):
        service.update_cluster_request(
            session, row.id, status="bogus", staff_note=None, actor=staff, now=clock.now()
        )
    assert row.status == "new"
    service.update_cluster_request(
        session, row.id, status="contacted", staff_note=" called ", actor=staff, now=clock.now()
    )
    assert (row.status, row.staff_note) == ("contacted", "called")
    events = session.exec(
        select(AuditEvent).where(AuditEvent.target == f"cluster_request:{row.id}")
    ).all()
    assert [e.action for e in events] == ["cluster_request.status"]
    assert service.quote_values_from_request(session, row.id)["quantity"] == "40"


def test_start_date_bounds_come_from_the_clock(clock: FixedClock) -> None:
    from pydantic import ValidationError

    from app.quotes.schemas import ClusterRequestIn

    today = clock.now().date()
    ok = ClusterRequestIn.model_validate(
        good(start_date=today.isoformat()), context={"today": today}
    )
    assert ok.start_date == today
    with pytest.raises(ValidationError):
        ClusterRequestIn.model_validate(
            good(start_date=(today - timedelta(days=1)).isoformat()), context={"today": today}
        )


# ----------------------------------------------------------------------------- self-serve limit


def test_deploy_above_the_limit_shows_the_sales_path(
    client: TestClient, make_user: Any, login: Any, engine: Any
) -> None:
    n = SELF_SERVE_MAX_NODES + 1
    r = client.get("/deploy", params={"sku": "hgx-h100", "nodes": str(n), "sizing": SIZING})
    assert r.status_code == 200
    link = service.cluster_request_path(sku="hgx-h100", nodes=n, sizing=SIZING)
    assert link.replace("&", "&amp;") in r.text
    r = client.get(
        "/deploy/summary",
        params={"sku": "hgx-h100", "nodes": str(n)},
        headers={"HX-Request": "true"},
    )
    assert "/cluster-request?sku=hgx-h100&amp;nodes=17" in r.text
    u = make_user()
    login(client, u)
    data = deploy_form(client, sku="hgx-h100", nodes=str(n), image="ubuntu-24.04-cuda")
    r = client.post("/deploy", data=data)
    assert r.status_code == 422
    assert 'id="e-nodes"' in r.text and "talk to sales" in r.text
    from app.orders.models import Order

    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def test_deploy_at_the_limit_is_self_serve(client: TestClient) -> None:
    r = client.get(
        "/deploy/summary",
        params={"sku": "hgx-h100", "nodes": str(SELF_SERVE_MAX_NODES)},
        headers={"HX-Request": "true"},
    )
    assert "/cluster-request" not in r.text


def test_api_above_the_limit_answers_422_with_the_sales_path(
    raw_client: TestClient, engine: Any, clock: FixedClock, make_user: Any
) -> None:
    from app.orders.models import Order

    h = token_for(engine, clock, make_user())
    n = SELF_SERVE_MAX_NODES + 1
    r = raw_client.post(
        "/api/v1/orders",
        json=body(sku="hgx-h100", nodes=n, sizing=SIZING),
        headers={**h, "Idempotency-Key": "big"},
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "above_self_serve" and err["field"] == "nodes"
    url = urlsplit(err["cluster_request_url"])
    assert url.path == "/cluster-request"
    assert parse_qs(url.query) == {"sku": ["hgx-h100"], "nodes": ["17"], "sizing": [SIZING]}
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []
