"""Every JSON API error has one envelope: ``{"error": {"code", "message", ...}}``, the
message in the reader's language; a 422 adds ``errors`` (field, code, message, params).
The sizing and launch routes used to answer ``{"error": {"errors": [...]}}`` with no code
or message, and the router's own 404/405 ``{"error": {"message": "Not Found"}}``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

ZH = re.compile(r"[\u4e00-\u9fff]")

CASES: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/api/v1/sizing", {"model": {"preset": "nope"}, "tokens": 1e12}, 422, "invalid_input"),
    ("POST", "/api/v1/sizing", {"tokens": "1e12"}, 422, "invalid_input"),
    ("POST", "/api/v1/sizing/launch", {"request": {"tokens": 1}}, 422, "invalid_input"),
    (
        "POST",
        "/api/v1/sizing/launch",
        {"request": {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12}, "option": 99},
        422,
        "invalid_input",
    ),
    ("POST", "/api/v1/sizing/launch", {}, 422, "invalid_input"),
    ("POST", "/api/v1/sizing/launch", {"request": {}, "extra": 1}, 422, "invalid_input"),
    ("POST", "/api/v1/no-such-route", {}, 404, "not_found"),
    ("DELETE", "/api/v1/sizing", None, 405, "method_not_allowed"),
    ("POST", "/api/v1/orders", {}, 401, "not_authenticated"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), CASES)
@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_one_envelope_for_every_error(
    client: TestClient, method: str, path: str, body: Any, status: int, code: str, lang: str
) -> None:
    client.cookies.set("lang", lang)
    r = client.request(method, path, json=body, headers={"Accept": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code
    assert isinstance(err["message"], str) and err["message"]
    assert bool(ZH.search(err["message"])) == (lang == "zh_CN"), err["message"]
    if status == 422:
        assert err["errors"] and all(
            {"field", "code", "message", "params"} <= set(e) for e in err["errors"]
        )
        if path.endswith("/launch"):  # a refusal or a body error, translated too
            message = err["errors"][0]["message"]
            assert bool(ZH.search(message)) == (lang == "zh_CN"), message
