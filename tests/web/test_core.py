"""The base layout, language switch, health endpoints, errors, headers and CSRF."""

from __future__ import annotations

import re

from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient

from app.web.deps import SessionDep


def test_home_in_english_and_chinese(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert '<html lang="en">' in r.text
    assert "Size a job" in r.text
    r = client.get("/lang/zh_CN?next=/")
    assert r.status_code == 303 and r.headers["location"] == "/"
    r = client.get("/")
    assert '<html lang="zh-CN">' in r.text
    assert "估算" in r.text or "规划" in r.text  # the nav is translated


def test_accept_language_picks_chinese(raw_client: TestClient) -> None:
    r = raw_client.get("/", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    assert '<html lang="zh-CN">' in r.text


def test_language_switch_refuses_open_redirects(client: TestClient) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        r = client.get("/lang/en", params={"next": target})
        assert r.headers["location"] == "/"


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"


def test_metrics_are_prometheus_text_behind_a_bearer_token(app, client: TestClient) -> None:  # type: ignore[no-untyped-def]
    client.get("/")
    assert client.get("/metrics").status_code == 404  # no token configured: not served
    app.state.settings.metrics_token = "s3cret-metrics-token"
    assert client.get("/metrics").status_code == 401
    r = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = client.get("/metrics", headers={"Authorization": "Bearer s3cret-metrics-token"})
    assert r.status_code == 200
    assert "http_requests_total" in r.text


def test_404_in_both_languages(client: TestClient) -> None:
    r = client.get("/no-such-page")
    assert r.status_code == 404 and "Page not found" in r.text
    client.cookies.set("lang", "zh_CN")
    r = client.get("/no-such-page")
    assert r.status_code == 404 and "页面" in r.text


def test_api_errors_are_json(client: TestClient) -> None:
    r = client.get("/api/v1/no-such-thing")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/json")


def test_security_headers(client: TestClient) -> None:
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"]
    assert "strict-transport-security" not in r.headers  # only over https
    assert r.headers["x-request-id"]


def test_app_headers_replace_or_keep_what_a_handler_set(
    app: FastAPI, raw_client: TestClient
) -> None:
    """Security headers replace a handler's own (frame options, nosniff, request id); the
    handler's CSP, referrer policy, language and Vary are kept; exactly one of each."""

    @app.get("/_test/own-headers")
    def own() -> Response:
        return Response(
            "x",
            headers={
                "X-Frame-Options": "SAMEORIGIN",
                "X-Request-ID": "from-the-handler",
                "Content-Security-Policy": "default-src 'none'",
                "Referrer-Policy": "no-referrer",
                "Content-Language": "fr",
                "Vary": "Origin",
            },
        )

    r = raw_client.get("/_test/own-headers", headers={"X-Request-ID": "abc-123"})
    h = r.headers
    assert h.get_list("x-frame-options") == ["DENY"]
    assert h.get_list("x-request-id") == ["abc-123"]  # the caller's id, echoed
    assert h.get_list("content-security-policy") == ["default-src 'none'"]
    assert h.get_list("referrer-policy") == ["no-referrer"]
    assert h.get_list("content-language") == ["fr"]
    assert h.get_list("vary") == ["Origin"]
    # a request id that is not a short token is replaced by one of ours
    for bad in (b"a" * 65, b"x y", b"<script>", "名字".encode(), b"caf\xe9"):
        got = raw_client.get("/healthz", headers={"X-Request-ID": bad}).headers["x-request-id"]
        assert got.encode("latin-1") != bad and len(got) == 16 and got.isalnum()
    # the language cookie wins over Accept-Language, in any of several Cookie headers
    r = raw_client.get(
        "/healthz",
        headers=[("Accept-Language", "en"), ("Cookie", "a=1"), ("Cookie", "lang=zh_CN")],
    )
    assert r.headers["content-language"] == "zh-CN"


def test_static_files_are_cached_for_a_year(raw_client: TestClient) -> None:
    r = raw_client.get("/static/app.css")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert r.headers["x-content-type-options"] == "nosniff"


def test_made_up_methods_share_one_metrics_label(app: FastAPI, raw_client: TestClient) -> None:
    from prometheus_client import REGISTRY

    for i in range(5):
        raw_client.request(f"BREW{i}", "/healthz")
    labels = {
        s.labels["method"]
        for m in REGISTRY.collect()
        if m.name == "http_requests"
        for s in m.samples
    }
    assert "OTHER" in labels
    assert not any(x.startswith("BREW") for x in labels)


def test_every_page_has_no_inline_script(client: TestClient) -> None:
    r = client.get("/")
    import re

    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", r.text)
    assert "onclick=" not in r.text


def test_post_without_csrf_is_refused_and_changes_nothing(
    app: FastAPI, raw_client: TestClient
) -> None:
    hits: list[int] = []

    @app.post("/_test/echo")
    def echo() -> dict[str, int]:
        hits.append(1)
        return {"ok": 1}

    r = raw_client.post("/_test/echo", data={"x": "1"})
    assert r.status_code == 403
    r = raw_client.post("/_test/echo", data={"x": "1", "csrf_token": "forged"})
    assert r.status_code == 403
    assert hits == []
    # A page view hands out a token; sending it back works.
    page = raw_client.get("/")
    import re

    token = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    r = raw_client.post("/_test/echo", data={"csrf_token": token})
    assert r.status_code == 200 and hits == [1]
    r = raw_client.post("/_test/echo", headers={"X-CSRF-Token": token})
    assert r.status_code == 200


def test_api_clients_with_only_a_language_cookie_need_no_csrf_token(
    raw_client: TestClient,
) -> None:
    """The JSON API's exemption follows the credential, not the Cookie header: a client
    that keeps the language cookie is answered in it; one that sends our session cookie
    must carry the token like a form."""
    from app.accounts.security import SESSION_COOKIE

    body = '{"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}'
    json_type = {"Content-Type": "application/json"}
    r = raw_client.post(
        "/api/v1/sizing", content=body, headers={**json_type, "Cookie": "lang=zh_CN"}
    )
    assert r.status_code == 200, r.text
    assert re.search(r"[\u4e00-\u9fff]", r.json()["recommendation"]["reason"])
    r = raw_client.post(
        "/api/v1/sizing",
        content=body,
        headers={**json_type, "Cookie": f"lang=zh_CN; {SESSION_COOKIE}=some-session"},
    )
    assert r.status_code == 403


def test_request_transaction_rolls_back_on_error(app: FastAPI, engine) -> None:  # type: ignore[no-untyped-def]
    from sqlmodel import Session, select

    from app.notifications.models import OutboxEmail

    @app.post("/_test/fail")
    def fail(db: SessionDep) -> None:
        from datetime import UTC, datetime

        db.add(
            OutboxEmail(
                to_addr="x@example.com",
                subject="s",
                body="b",
                created_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
        )
        db.flush()
        raise RuntimeError("boom")

    from tests.conftest import AppClient, _with_csrf_cookie

    client = AppClient(app, raise_server_exceptions=False)
    _with_csrf_cookie(client)
    r = client.post("/_test/fail")
    assert r.status_code == 500
    assert "Nothing was charged" in r.text
    with Session(engine) as s:
        assert s.exec(select(OutboxEmail)).all() == []


def test_every_form_on_public_pages_carries_the_page_token(raw_client: TestClient) -> None:
    """Real browsers send only what the form holds: no empty csrf_token fields anywhere."""
    import re

    for path in (
        "/",
        "/login",
        "/signup",
        "/password/forgot",
        "/deploy",
        "/nodes/gb300-nvl72/request",
        "/size",
    ):
        r = raw_client.get(path)
        if r.status_code != 200:
            continue
        meta = re.search(r'name="csrf-token" content="([^"]+)"', r.text)
        assert meta, path
        for value in re.findall(r'name="csrf_token" value="([^"]*)"', r.text):
            assert value == meta.group(1), f"{path}: a form carries {value!r}"


def test_every_form_on_staff_and_console_pages_carries_the_page_token(
    raw_client: TestClient, make_user, login
) -> None:  # type: ignore[no-untyped-def]
    import re

    login(raw_client, make_user("ops"))
    for path in (
        "/staff",
        "/staff/ops",
        "/staff/nodes",
        "/staff/ledger",
        "/staff/quotes",
        "/staff/quotes/new",
        "/staff/clock",
        "/staff/audit",
        "/staff/users",
        "/account",
        "/console",
        "/balance",
        "/topups/new",
    ):
        r = raw_client.get(path)
        if r.status_code != 200:
            continue
        meta = re.search(r'name="csrf-token" content="([^"]+)"', r.text)
        assert meta, path
        for value in re.findall(r'name="csrf_token" value="([^"]*)"', r.text):
            assert value == meta.group(1), f"{path}: a form carries {value!r}"


def test_a_logged_in_page_that_writes_renders_without_waiting_on_itself(
    app: FastAPI, client: TestClient, make_user, login
) -> None:  # type: ignore[no-untyped-def]
    """A handler that holds the write lock and renders a page for a logged-in user
    (the template looks the user up) must not wait on its own transaction."""
    from app.clock import monotonic
    from app.web.templating import render

    @app.post("/_test/write-then-render")
    def write_then_render(request: Request, db: SessionDep) -> Response:
        from datetime import UTC, datetime

        from app.notifications.models import OutboxEmail

        db.add(
            OutboxEmail(
                to_addr="x@example.com",
                subject="s",
                body="b",
                created_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
        )
        db.flush()
        return render(request, "home.html", {"specs": []})

    login(client, make_user())
    started = monotonic()
    r = client.post("/_test/write-then-render")
    assert r.status_code == 200
    assert "Log out" in r.text
    assert monotonic() - started < 5  # the busy timeout is 15 s; this is a hang check, not a timing
