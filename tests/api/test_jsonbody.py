"""What a hostile client sends to the JSON API: each body gets a 422 naming the field with a
code and a message in the reader's language, never a 500 or a bare 400, and nothing is
written. A strict API also refuses text where the schema says number."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import create_api_token
from app.api import jsonbody
from app.clock import FixedClock
from app.db import metadata
from app.orders.schemas import MAX_SSH_KEY_IDS
from tests.orders.conftest import new_public_key
from tests.support import factories

KEY = new_public_key()
DIGITS = "9" * 5000  # past Python's int-string limit (4300): the parse itself failed
ZH = re.compile(r"[\u4e00-\u9fff]")

SIZING = '{"model": {"preset": "llama-3.1-8b"}, "tokens": %s}'
ORDER = (
    '{"sku": "hgx-b200", "nodes": %s, "image": "ubuntu-24.04-cuda",'
    ' "ssh_key": {"name": "ci", "public_key": "' + KEY + '"}}'
)
TOPUP = '{"amount_cents": %s, "currency": "USDC"}'
SSH_KEY = '{"name": "laptop", "public_key": "' + KEY + '", "x": %s}'
ENDPOINTS = {
    "/api/v1/sizing": (SIZING, "1e11", "tokens"),
    "/api/v1/orders": (ORDER, "1", "nodes"),
    "/api/v1/topups": (TOPUP, "250000", "amount_cents"),
    "/api/v1/ssh-keys": (SSH_KEY, "1", "x"),
}
HOSTILE = [
    (DIGITS, "request.number_too_long"),
    ("-" + DIGITS, "request.number_too_long"),
    ("1e400", "request.not_finite"),
    ("-1e400", "request.not_finite"),
    ("NaN", "request.not_finite"),
    ("Infinity", "request.not_finite"),
    ("-Infinity", "request.not_finite"),
]


@pytest.fixture
def api(raw_client: TestClient, engine: Engine, clock: FixedClock, make_user) -> TestClient:  # type: ignore[no-untyped-def]
    """A customer's bearer token, money on the balance and a node in stock: every good body
    of ENDPOINTS succeeds, so a refused one is refused for its own fault."""
    from app.catalog import service as catalog

    user: User = make_user()
    with Session(engine, expire_on_commit=False) as s:
        catalog.add_node(s, sku_id="hgx-b200", now=clock.now())
        _row, raw = create_api_token(s, user, "ci", clock.now())
        s.commit()
    factories.fund(engine, user, 10_000_000, clock.now())
    raw_client.headers.update({"Authorization": f"Bearer {raw}", "Idempotency-Key": "k-1"})
    return raw_client


def rows(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        return {
            t.name: int(s.execute(select(func.count()).select_from(t)).scalar_one())
            for t in metadata.sorted_tables
        }


def post(api: TestClient, path: str, body: str | bytes, lang: str = "en") -> Any:
    headers = {"Content-Type": "application/json", "Accept-Language": lang}
    raw = body.encode() if isinstance(body, str) else body
    return api.post(path, content=raw, headers=headers)


def assert_refused(r: Any, field: str, code: str) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert (err["errors"][0]["field"], err["errors"][0]["code"]) == (field, code), err
    assert err["errors"][0]["message"]
    return err  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_hostile_numbers_name_the_field_and_change_nothing(
    api: TestClient, engine: Engine, path: str
) -> None:
    template, good, field = ENDPOINTS[path]
    before = rows(engine)
    for value, code in HOSTILE:
        for lang in ("en", "zh-CN"):
            err = assert_refused(post(api, path, template % value, lang), field, code)
            if lang == "zh-CN":
                assert ZH.search(err["errors"][0]["message"]) and ZH.search(err["message"])
    assert rows(engine) == before
    ok = post(api, path, template % good)
    assert ok.status_code in (200, 201), ok.text  # the same body, well-formed, is taken


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_a_key_twice_is_refused_not_last_one_wins(
    api: TestClient, engine: Engine, path: str
) -> None:
    """``{"nodes": 1, "nodes": 2}``: parsers disagree on which one counts; refused."""
    template, good, field = ENDPOINTS[path]
    body = template % good
    twice = body[:-1] + f', "{field}": {good}}}'
    before = rows(engine)
    err = assert_refused(post(api, path, twice, "zh-CN"), field, "request.duplicate_key")
    assert ZH.search(err["errors"][0]["message"])
    inner = body.replace('"name"', '"name": "a", "name"', 1)
    if '"name"' in body:
        assert_refused(post(api, path, inner), inner_field(path), "request.duplicate_key")
    assert rows(engine) == before


def inner_field(path: str) -> str:
    return "ssh_key.name" if path == "/api/v1/orders" else "name"


@pytest.mark.parametrize("path", list(ENDPOINTS))
@pytest.mark.parametrize("depth", [40, 100_000])
def test_deep_nesting_is_refused(api: TestClient, engine: Engine, path: str, depth: int) -> None:
    before = rows(engine)
    for body in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        r = post(api, path, body, "zh-CN")
        err = assert_refused(r, "body", "request.too_deep")
        assert err["errors"][0]["params"] == {"max": jsonbody.MAX_DEPTH}
        assert ZH.search(err["errors"][0]["message"])
    assert rows(engine) == before


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_not_json_names_line_and_column(api: TestClient, engine: Engine, path: str) -> None:
    before = rows(engine)
    err = assert_refused(post(api, path, '{"a": 1,\n "b": }'), "body", "request.not_json")
    assert err["errors"][0]["params"] == {"line": 2, "column": 7}
    assert_refused(post(api, path, b'{"a": "\xff"}'), "body", "request.not_json")  # not UTF-8
    assert rows(engine) == before


def test_a_huge_array_is_refused_by_the_field(api: TestClient, engine: Engine) -> None:
    """A list field takes what an account can hold (an account keeps at most 50 keys)."""
    before = rows(engine)
    ids = [1] * 100_000
    body = json.loads(ORDER % "1") | {"ssh_key_ids": ids}
    err = assert_refused(
        post(api, "/api/v1/orders", json.dumps(body)), "ssh_key_ids", "request.too_many"
    )
    assert err["errors"][0]["params"]["max_length"] == MAX_SSH_KEY_IDS
    nans = "[" + ",".join(["NaN"] * 10_000) + "]"
    r = post(api, "/api/v1/sizing", SIZING % nans)
    assert len(r.json()["error"]["errors"]) == jsonbody.MAX_PROBLEMS
    assert rows(engine) == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/topups", TOPUP % '"250000"', "amount_cents"),
        ("/api/v1/orders", ORDER % '"1"', "nodes"),
        ("/api/v1/orders", (ORDER % "1")[:-1] + ', "ssh_key_ids": ["3"]}', "ssh_key_ids.0"),
        (
            "/api/v1/orders",
            (ORDER % "1")[:-1] + ', "notes": {"node_count": "2"}}',
            "notes.node_count",
        ),
        ("/api/v1/sizing", SIZING % '"1e11"', "tokens"),
    ],
)
def test_text_where_a_number_is_documented(
    api: TestClient, engine: Engine, path: str, body: str, field: str
) -> None:
    before = rows(engine)
    for lang in ("en", "zh-CN"):
        r = post(api, path, body, lang)
        assert r.status_code == 422
        errs = r.json()["error"]["errors"]
        assert (errs[0]["field"], errs[0]["code"]) == (field, "request.string_not_number")
        assert lang == "en" or ZH.search(errs[0]["message"])
    assert rows(engine) == before


def test_every_field_error_has_a_code_and_a_translated_message(api: TestClient) -> None:
    """The API's own validation (pydantic) answers in the same shape as the sizing engine:
    field, code, message (in the reader's language) and the limits."""
    r = post(api, "/api/v1/topups", '{"currency": 5, "return_to": []}', "zh-CN")
    assert r.status_code == 422
    errs = {e["field"]: e for e in r.json()["error"]["errors"]}
    assert errs["amount_cents"]["code"] == "request.required"
    assert errs["currency"]["code"] == "request.not_text"
    assert errs["return_to"]["code"] == "request.not_text"
    assert all(ZH.search(e["message"]) for e in errs.values())
    assert ZH.search(r.json()["error"]["message"])


def test_loads_is_json_loads_for_json() -> None:
    body = {"a": [1, 2.5, -3, 1e300, {"b": None, "c": True, "d": "x" * 10}], "e": 10**99}
    assert jsonbody.loads(json.dumps(body).encode()) == body
    assert jsonbody.loads(b'"\\u4e2d"') == "\u4e2d"
    with pytest.raises(jsonbody.BodyError) as e:
        jsonbody.loads(b'{"a": [{"b": ' + DIGITS.encode() + b'}], "c": NaN}')
    assert [(f, c) for f, c, _p in e.value.problems] == [
        ("a.0.b", "request.number_too_long"),
        ("c", "request.not_finite"),
    ]


@pytest.mark.parametrize(("field", "body"), [("model.preset", "preset"), ("sku", "sku")])
def test_a_huge_name_is_refused_by_its_length_without_echoing_it(
    api: TestClient, field: str, body: str
) -> None:
    """An unknown preset or node of 100 KB came back twice in the answer (200 KB)."""
    req: dict[str, Any] = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}
    huge = "x" * 100_000
    if body == "preset":
        req["model"]["preset"] = huge
    else:
        req["sku"] = huge
    r = post(api, "/api/v1/sizing", json.dumps(req))
    assert r.status_code == 422
    assert r.json()["error"]["errors"][0]["field"] == field
    assert len(r.content) < 2_000, len(r.content)
