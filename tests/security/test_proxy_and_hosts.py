"""Finding 2 (client addresses come from trusted proxies only) and the Host check (9)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.clock import FixedClock
from app.main import create_app
from app.settings import Settings
from app.web.proxy import client_from_chain
from tests.conftest import TEST_SECRET, AppClient, _with_csrf_cookie

NETS = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1/32"))


@pytest.mark.parametrize(
    ("peer", "chain", "expected"),
    [
        ("203.0.113.9", ["1.2.3.4"], "203.0.113.9"),  # untrusted peer: header ignored
        ("10.0.0.2", ["1.2.3.4"], "1.2.3.4"),
        ("10.0.0.2", ["6.6.6.6, 1.2.3.4"], "1.2.3.4"),  # spoofed left entry ignored
        ("10.0.0.2", ["6.6.6.6", "1.2.3.4, 10.0.0.5"], "1.2.3.4"),  # two proxies
        ("10.0.0.2", ["10.0.0.7, 10.0.0.5"], "10.0.0.7"),  # all trusted: the left-most
        ("10.0.0.2", ["garbage, 1.2.3.4"], "1.2.3.4"),
        ("10.0.0.2", ["1.2.3.4, garbage"], "10.0.0.2"),  # unreadable hop: stop there
        ("10.0.0.2", [], "10.0.0.2"),
    ],
)
def test_right_most_untrusted_hop(peer: str, chain: list[str], expected: str) -> None:
    assert client_from_chain(peer, chain, NETS) == expected


def _app(db_url: str, clock: FixedClock, **kw: Any) -> Any:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        environment="test",
        database_url=db_url,
        secret_key=TEST_SECRET,
        webhook_secret="test-webhook-secret",
        **kw,
    )
    return create_app(settings, clock=clock)


def _failed_logins(c: TestClient, n: int, headers_for: Any) -> list[int]:
    codes = []
    for i in range(n):
        r = c.post(
            "/login",
            data={"email": f"victim{i}@example.com", "password": "wrong password 123"},
            headers=headers_for(i),
        )
        codes.append(r.status_code)
    return codes


def test_rotating_x_forwarded_for_does_not_escape_the_address_throttle(
    db_url: str, clock: FixedClock
) -> None:
    app = _app(db_url, clock)  # no trusted proxies (the default)
    try:
        with AppClient(app, client=("203.0.113.9", 5000), follow_redirects=False) as c:
            _with_csrf_cookie(c)
            codes = _failed_logins(c, 25, lambda i: {"X-Forwarded-For": f"198.51.100.{i}"})
        assert codes.count(429) >= 5, codes
        with Session(app.state.engine) as s:
            ips = {e.ip for e in s.exec(select(AuditEvent)).all()}
        assert ips == {"203.0.113.9"}
    finally:
        app.state.engine.dispose()


def test_a_trusted_proxy_supplies_the_client_address(db_url: str, clock: FixedClock) -> None:
    app = _app(db_url, clock, trusted_proxies="10.0.0.0/8")
    try:
        with AppClient(app, client=("10.0.0.2", 5000), follow_redirects=False) as c:
            _with_csrf_cookie(c)
            # The attacker rotates the left part; the proxy appends the real address.
            codes = _failed_logins(
                c, 25, lambda i: {"X-Forwarded-For": f"198.51.100.{i}, 203.0.113.50"}
            )
            assert codes.count(429) >= 5, codes
            # A different real client behind the same proxy is not blocked.
            r = c.post(
                "/login",
                data={"email": "other@example.com", "password": "wrong password 123"},
                headers={"X-Forwarded-For": "203.0.113.51"},
            )
            assert r.status_code != 429
        with Session(app.state.engine) as s:
            ips = {e.ip for e in s.exec(select(AuditEvent)).all()}
        assert "203.0.113.50" in ips and not any(ip.startswith("198.51.100.") for ip in ips)
    finally:
        app.state.engine.dispose()


def test_forwarded_proto_only_from_a_trusted_proxy(db_url: str, clock: FixedClock) -> None:
    for trusted, expect_https in (("", False), ("10.0.0.0/8", True)):
        app = _app(db_url, clock, trusted_proxies=trusted)
        try:

            @app.get("/_scheme")
            def scheme(request: Request) -> dict[str, str]:  # pragma: no cover - trivial
                return {"scheme": request.url.scheme}

            with TestClient(app, client=("10.0.0.2", 5000)) as c:
                r = c.get("/_scheme", headers={"X-Forwarded-Proto": "https"})
            assert (r.json()["scheme"] == "https") is expect_https
        finally:
            app.state.engine.dispose()


def test_production_rejects_unknown_hosts_but_not_probes(db_url: str, clock: FixedClock) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        environment="production",
        database_url=db_url,
        secret_key="prod-secret-0123456789-abcdefghijklmnopqrstuv",
        webhook_secret="webhook-secret-0123456789-abcdef",
        simulation=True,
        force_simulation=True,
        base_url="https://gpunodes.example",
    )
    app = create_app(settings, clock=clock)
    try:
        with TestClient(app, base_url="https://evil.example") as c:
            assert c.get("/").status_code == 400
            assert c.get("/healthz").status_code == 200
            assert c.get("/readyz").status_code == 200
        with TestClient(app, base_url="https://gpunodes.example") as c:
            r = c.get("/")
            assert r.status_code == 200
    finally:
        app.state.engine.dispose()


def test_script_and_style_urls_do_not_come_from_the_host_header(client: TestClient) -> None:
    r = client.get("/nodes", headers={"Host": "evil.example"})
    assert r.status_code == 200
    assert "evil.example" not in r.text
    assert 'src="/static/' in r.text and 'href="/static/app.css"' in r.text


def test_api_docs_do_not_load_from_a_cdn(client: TestClient) -> None:
    assert client.get("/api/docs").status_code == 404
    assert client.get("/openapi.json").status_code == 200
