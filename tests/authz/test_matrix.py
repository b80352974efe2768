"""Every route of the app × five actors has an expected outcome (see README.md)."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

import tests.authz as authz
from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session, hash_password
from app.clock import FixedClock
from app.main import create_app
from app.settings import Settings
from tests.authz import ACTORS, Ctx, Rule
from tests.conftest import START, TEST_SECRET, AppClient, _with_csrf_cookie

SKIP_METHODS = {"HEAD", "OPTIONS"}
_HASH = hash_password("matrix password 123")  # one argon2 hash for every matrix user


def load_rules() -> list[Rule]:
    rules: list[Rule] = []
    folder = Path(authz.__file__).parent
    for info in pkgutil.iter_modules([str(folder)]):
        if info.name.startswith(("test_", "_", "conftest")):
            continue
        module = importlib.import_module(f"tests.authz.{info.name}")
        rules += getattr(module, "RULES", [])
    return rules


def route_keys(app: FastAPI) -> set[tuple[str, str]]:
    keys: set[tuple[str, str]] = set()
    for rc in iter_route_contexts(app.routes):
        methods = rc.methods
        if not methods or rc.path is None:
            continue  # mounts (static files)
        for m in methods - SKIP_METHODS:
            keys.add((m, rc.path))
    return keys


RULES = load_rules()


def _rule_id(rule: Rule) -> str:
    return f"{rule.method} {rule.path}"


def coverage_problems(app: FastAPI, rules: list[Rule]) -> list[str]:
    routes = route_keys(app)
    ruled: dict[tuple[str, str], int] = {}
    for r in rules:
        ruled[(r.method, r.path)] = ruled.get((r.method, r.path), 0) + 1
    problems = [f"no rule: {m} {p}" for m, p in sorted(routes - set(ruled))]
    problems += [f"stale rule: {m} {p}" for m, p in sorted(set(ruled) - routes)]
    problems += [f"more than one rule: {m} {p}" for (m, p), n in sorted(ruled.items()) if n > 1]
    return problems


def test_every_route_has_exactly_one_rule(matrix_app: FastAPI) -> None:
    problems = coverage_problems(matrix_app, RULES)
    assert not problems, "fix tests/authz/<domain>.py (see README.md):\n  " + "\n  ".join(problems)


def test_a_new_route_without_a_rule_is_caught(app: FastAPI) -> None:
    @app.get("/brand-new/{thing_id}")
    def brand_new(thing_id: int) -> dict[str, int]:
        return {"id": thing_id}

    assert coverage_problems(app, RULES) == ["no rule: GET /brand-new/{thing_id}"]


_COUNTER = itertools.count(1)


def _users(engine: Engine, now: Any) -> dict[str, User]:
    """Four fresh users per rule (the app and its database are shared by the module)."""
    n = next(_COUNTER)
    out: dict[str, User] = {}
    with Session(engine, expire_on_commit=False) as s:
        for key, role in (
            ("a", "customer"),
            ("b", "customer"),
            ("sales", "sales"),
            ("ops", "ops"),
            ("unenrolled_staff", "ops"),
        ):
            u = User(
                email=f"matrix-{key}-{n}@example.com",
                password_hash=_HASH,
                role=role,
                created_at=now,
            )
            if role != "customer" and key != "unenrolled_staff":
                # staff with their second factor on (the matrix requires it, as production)
                u.totp_secret, u.totp_enabled_at = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", now
            s.add(u)
            out[key] = u
        s.commit()
    return out


@pytest.fixture(scope="module")
def matrix_app(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FastAPI]:
    """One app for the whole matrix (SQLite; who may do what does not depend on the
    backend): building an app per rule would make this suite the slowest in the project."""
    target = tmp_path_factory.mktemp("authz") / "matrix.db"
    shutil.copy(sqlite_template, target)
    settings = Settings(
        environment="test",
        database_url=f"sqlite:///{target}",
        secret_key=TEST_SECRET,
        simulation=True,
        webhook_secret="test-webhook-secret",
        staff_second_factor=True,
    )
    application = create_app(settings, clock=FixedClock(START))
    yield application
    application.state.engine.dispose()


@pytest.fixture
def actors(matrix_app: FastAPI) -> dict[str, User]:
    return _users(matrix_app.state.engine, matrix_app.state.clock.now())


@pytest.fixture(scope="module")
def browser(matrix_app: FastAPI) -> Iterator[AppClient]:
    with AppClient(matrix_app, base_url="http://testserver", follow_redirects=False) as c:
        yield c


def _login_as(c: TestClient, engine: Engine, user: User | None, now: Any) -> None:
    c.cookies.clear()
    _with_csrf_cookie(c)
    if user is None:
        return
    with Session(engine) as s:
        cookie = create_session(s, user, now, TEST_SECRET)
        s.commit()
    c.cookies.set(SESSION_COOKIE, cookie)


@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_rule(rule: Rule, matrix_app: FastAPI, actors: dict[str, User], browser: AppClient) -> None:
    app = matrix_app
    engine = app.state.engine
    clock = app.state.clock
    who = {
        "anon": None,
        "customer": actors["a"],
        "other_customer": actors["b"],
        "sales": actors["sales"],
        "ops": actors["ops"],
        "unenrolled_staff": actors["unenrolled_staff"],
    }
    failures = []
    for actor in ACTORS:
        params: dict[str, Any] = {}
        body: dict[str, Any] | None = None
        if rule.setup is not None or callable(rule.data):
            with Session(engine, expire_on_commit=False) as s:
                ctx = Ctx(
                    app=app,
                    session=s,
                    now=clock.now(),
                    a=actors["a"],
                    b=actors["b"],
                    sales=actors["sales"],
                    ops=actors["ops"],
                    unenrolled_staff=actors["unenrolled_staff"],
                )
                params = rule.setup(ctx) if rule.setup else {}
                s.commit()
                body = rule.data(ctx, params) if callable(rule.data) else rule.data
        else:
            body = rule.data  # type: ignore[assignment]
        path = rule.path.format(**{k: v for k, v in params.items() if "{" + k + "}" in rule.path})
        _login_as(browser, engine, who[actor], clock.now())
        kwargs: dict[str, Any] = {"headers": dict(rule.headers or {})}
        if rule.json is not None:
            kwargs["json"] = rule.json
        elif body is not None and rule.method != "GET":
            kwargs["data"] = body
        r = browser.request(rule.method, path, **kwargs)
        expected = rule.expected(actor)
        location = r.headers.get("location", "")
        if not expected.check(r.status_code, location):
            failures.append(
                f"{actor}: expected {expected!r}, got {r.status_code} {location}".rstrip()
            )
    assert not failures, f"{rule.method} {rule.path}\n  " + "\n  ".join(failures)
