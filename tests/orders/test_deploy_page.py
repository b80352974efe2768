"""The /deploy page: prefill, validation, the inline account step, the live summary."""

from __future__ import annotations

import gzip
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.accounts.models import User
from app.orders.models import Order
from tests.orders.conftest import deploy_form

STATIC = Path(__file__).resolve().parents[2] / "static"


def test_prefill_from_sizing_and_notes(client: TestClient, stock) -> None:
    stock("hgx-h200", 1)
    q = {
        "sku": "hgx-h200",
        "nodes": "2",
        "note_model_size": "32B",
        "note_token_budget": "200B",
        "note_node_count": "2",
        "note_private_network": "1",
        "note_comm_pattern": "FSDP across 2 nodes",
        "sizing": "model=qwen-32b&tokens=200e9",
    }
    r = client.get("/deploy", params=q)
    assert r.status_code == 200
    t = r.text
    assert 'value="hgx-h200" selected' in t and 'value="2"' in t
    assert 'value="32B"' in t and 'value="200B"' in t and "FSDP across 2 nodes" in t
    assert 'name="note_private_network" value="1" checked' in t
    assert "from your sizing" in t and 'href="/size?model=qwen-32b&amp;tokens=200e9"' in t
    assert "Promised delivery" in t and "$39,800.00" in t  # 2 × H200 first month
    assert 'name="account_mode"' in t  # logged out: the inline account step


def test_rack_goes_to_sales(client: TestClient) -> None:
    r = client.get("/deploy", params={"sku": "gb300-nvl72"})
    assert r.status_code == 200 and "Talk to sales" in r.text


def test_summary_fragment_follows_choices(
    client: TestClient, make_user, login, fund, stock
) -> None:
    stock("mi355x", 1)
    u = make_user()
    fund(u, 1_000_000)
    login(client, u)
    r = client.get(
        "/deploy/summary", params={"sku": "mi355x", "nodes": "1"}, headers={"HX-Request": "true"}
    )
    assert r.status_code == 200 and "<html" not in r.text
    assert "$22,900.00" in r.text and "$12,900.00" in r.text  # price and shortfall
    r = client.get(
        "/deploy/summary", params={"sku": "mi355x", "nodes": "0"}, headers={"HX-Request": "true"}
    )
    assert "between 1 and 16" in r.text
    r = client.get("/deploy/summary", params={"sku": "mi355x", "nodes": "1"})
    assert r.status_code == 303  # without htmx the summary lives on the page


def test_incompatible_image_and_missing_pattern_are_refused(
    client: TestClient, engine, make_user, login, stock
) -> None:
    stock("mi355x", 1)
    u = make_user()
    login(client, u)
    data = deploy_form(
        client,
        sku="mi355x",
        image="ubuntu-24.04-cuda",
        note_private_network="1",
        nodes="2",
        note_model_size="405B",
    )
    r = client.post("/deploy", data=data)
    assert r.status_code == 422
    assert "MI355X needs a ROCm image" in r.text
    assert "communication pattern" in r.text
    assert 'value="405B"' in r.text  # what was typed is kept
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def test_private_key_is_refused_and_not_echoed(
    client: TestClient, engine, make_user, login
) -> None:
    u = make_user()
    login(client, u)
    secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    r = client.post("/deploy", data=deploy_form(client, new_key_text=secret))
    assert r.status_code == 422 and "PRIVATE key" in r.text
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in r.text


def test_signup_inside_the_form(client: TestClient, engine, stock) -> None:
    stock("hgx-b200", 1)
    data = deploy_form(
        client,
        account_mode="signup",
        email="new@example.com",
        password="a long passphrase 42",
        note_free_text="please hurry",
    )
    r = client.post("/deploy", data=data)
    assert r.status_code == 303, r.text
    assert r.headers["location"].startswith("/orders/")
    assert "set-cookie" in r.headers
    review = client.get(r.headers["location"])
    assert review.status_code == 200 and "please hurry" in review.text
    with Session(engine) as s:
        user = s.exec(select(User).where(User.email == "new@example.com")).one()
        assert s.exec(select(Order).where(Order.user_id == user.id)).one()


def test_the_same_sign_up_sent_twice_lands_on_the_same_order(
    client: TestClient, new_client, engine, stock
) -> None:
    """A double click (or a retry from a browser that lost the first answer) on the deploy
    form's sign-up: the second submit signs in with the password just chosen and finds the
    order the first made; another password is still refused as a sign-up."""
    stock("hgx-b200", 2)
    data = deploy_form(
        client, account_mode="signup", email="twice@example.com", password="a long passphrase 42"
    )
    first = client.post("/deploy", data=data)
    assert first.status_code == 303, first.text
    again = new_client()  # the retry carries no session cookie (the first answer was lost)
    second = again.post("/deploy", data=data)
    assert second.status_code == 303, second.text
    assert second.headers["location"] == first.headers["location"]
    assert "set-cookie" in second.headers
    wrong = new_client().post("/deploy", data={**data, "password": "another passphrase 42"})
    assert wrong.status_code == 422 and "can&#39;t be used for a new account" in wrong.text
    with Session(engine) as s:
        user = s.exec(select(User).where(User.email == "twice@example.com")).one()
        assert len(s.exec(select(Order).where(Order.user_id == user.id)).all()) == 1


def test_failed_login_keeps_every_choice_but_the_password(
    client: TestClient, engine, make_user, stock
) -> None:
    stock("hgx-h100", 1)
    make_user(email="old@example.com")
    data = deploy_form(
        client,
        sku="hgx-h100",
        nodes="1",
        image="ubuntu-22.04-cuda",
        note_model_size="13B",
        note_free_text="free text stays",
        account_mode="login",
        email="old@example.com",
        password="wrong password here",
    )
    r = client.post("/deploy", data=data)
    assert r.status_code == 422  # a wrong password is a field error, like any other
    t = r.text
    assert 'value="hgx-h100" selected' in t and 'value="ubuntu-22.04-cuda" selected' in t
    assert 'value="13B"' in t and "free text stays" in t and 'value="old@example.com"' in t
    assert "wrong password here" not in t
    assert data["new_key_text"] in t  # the pasted public key is kept too
    assert form_key(t) == data["idempotency_key"]
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def form_key(html: str) -> str:
    from tests.orders.conftest import form_value

    return form_value(html, "idempotency_key")


def test_deploy_page_is_light(client: TestClient, stock) -> None:
    stock("hgx-b200", 1)
    page = client.get("/deploy").content
    total = len(gzip.compress(page))
    for name in ("app.css", "orders.css", "app.js", "vendor/htmx-2.0.8.min.js"):
        total += len(gzip.compress((STATIC / name).read_bytes()))
    assert total <= 60 * 1024, total


def test_summary_warns_about_an_image_that_does_not_fit(client: TestClient) -> None:
    r = client.get(
        "/deploy/summary",
        params={"sku": "mi355x", "nodes": "1", "image": "ubuntu-24.04-cuda"},
        headers={"HX-Request": "true"},
    )
    assert "MI355X needs a ROCm image" in r.text
    r = client.get(
        "/deploy/summary",
        params={"sku": "mi355x", "nodes": "1", "image": "ubuntu-24.04-rocm"},
        headers={"HX-Request": "true"},
    )
    assert "ROCm image" not in r.text


def test_more_nodes_than_we_can_promise(
    client: TestClient, engine, make_user, login, stock
) -> None:
    stock("mi355x", 1)
    u = make_user()
    login(client, u)
    data = deploy_form(client, sku="mi355x", image="ubuntu-24.04-rocm", nodes="16")
    r = client.get(
        "/deploy/summary", params={"sku": "mi355x", "nodes": "16"}, headers={"HX-Request": "true"}
    )
    assert "No date we can promise" in r.text
    r = client.post("/deploy", data=data)
    assert r.status_code == 422 and "cannot promise a delivery date for this many nodes" in r.text
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def test_password_is_kept_when_another_field_fails(client: TestClient, engine, stock) -> None:
    """Issue 19, defect 10: the typed password survives an error elsewhere; a refused one
    is never echoed."""
    stock("hgx-b200", 1)
    data = deploy_form(
        client,
        account_mode="signup",
        email="keep@example.com",
        password="a long passphrase 42",
        image="no-such-image",
    )
    r = client.post("/deploy", data=data)
    assert r.status_code == 422
    assert 'value="a long passphrase 42"' in r.text
    assert r.headers.get("cache-control") == "no-store"
    data.update(password="short", image="ubuntu-24.04-cuda")
    r = client.post("/deploy", data=data)
    assert r.status_code == 422 and 'value="short"' not in r.text
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def test_node_count_follows_the_one_number_rule(
    client: TestClient, engine, make_user, login, stock
) -> None:
    """Issue 19, defect 10: full-width digits are a node count; other scripts' digits and
    superscripts are a 422 that orders nothing."""
    stock("hgx-b200", 2)
    login(client, make_user())
    for bad in ("١", "²", "1_0"):
        r = client.post("/deploy", data=deploy_form(client, nodes=bad))
        assert r.status_code == 422, bad
        assert "Enter a node count between 1 and 16." in r.text
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []
    r = client.post("/deploy", data=deploy_form(client, nodes="２"))
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        assert s.exec(select(Order)).one().quantity == 2


def test_order_notes_keep_no_control_characters() -> None:
    """Notes follow the house's text rule (app/text.py): a NUL byte, a bidi override or an
    escape in the notes never reaches the order (PostgreSQL would refuse the NUL; SQLite
    stored it), line breaks in the free text stay."""
    from app.orders import service
    from tests.orders.conftest import new_public_key

    draft, errors = service.parse_draft(
        {
            "sku": "hgx-b200",
            "nodes": "1",
            "image": "ubuntu-24.04-cuda",
            "new_key_name": "k",
            "new_key_text": new_public_key(),
            "note_model_size": "70B\x00 \u202eparams",
            "note_free_text": "hi\x00there\r\nline two\x1b[31m",
        }
    )
    assert errors == {}
    assert draft.note_model_size == "70B params"
    assert draft.note_free_text == "hithere\nline two[31m"
