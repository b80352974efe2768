"""``AppRoute`` (app/web/routing.py): a synchronous handler and the request's commit run in
one worker-thread call, never on the event loop; dependencies without I/O run on the loop;
everything a client sees is what FastAPI gives."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel
from sqlalchemy import event, text
from sqlmodel import Session

from app.db import make_engine
from app.web.deps import SessionDep, get_session
from app.web.routing import AppRoute

Seen = dict[str, Any]


class Item(BaseModel):
    id: int
    name: str
    secret: str = "hidden"


async def on_loop(request: Request) -> None:
    request.app.state.seen["loop"] = threading.get_ident()


def who(request: Request, db: SessionDep) -> str:
    seen = request.app.state.seen
    seen.setdefault("dep_threads", []).append(threading.get_ident())
    name = request.headers.get("x-user")
    if not name:
        raise HTTPException(401, "who are you")
    db.execute(text("SELECT 1"))
    return name


def who_again(user: Annotated[str, Depends(who)]) -> str:  # shares who()'s cached value
    return user.upper()


async def guard(request: Request) -> None:  # no I/O: on the loop
    if request.headers.get("x-deny"):
        raise HTTPException(403, "denied")


User = Annotated[str, Depends(who)]
Loud = Annotated[str, Depends(who_again)]
router = APIRouter(dependencies=[Depends(guard)], route_class=AppRoute)


@router.post("/items", status_code=201)
def add(request: Request, name: str, db: SessionDep, user: User, loud: Loud) -> Any:
    request.app.state.seen["handler_thread"] = threading.get_ident()
    db.execute(text("INSERT INTO t (name) VALUES (:n)"), {"n": f"{name}:{user}:{loud}"})
    if name == "boom":
        raise HTTPException(409, "boom")
    return {"ok": True}


@router.get("/items/{item_id}", response_model=Item, response_model_exclude={"secret"})
def get_item(item_id: int, db: SessionDep, user: User, response: Response) -> Any:
    row = db.execute(text("SELECT id, name FROM t WHERE id = :i"), {"i": item_id}).first()
    if row is None:
        raise HTTPException(404, "no such item")
    response.headers["X-Seen-By"] = user
    response.status_code = 203
    return {"id": row.id, "name": row.name, "secret": "s3cret"}


@router.get("/bad", response_model=Item)
def bad(user: User) -> Any:
    return {"id": "not a number", "name": "x"}


@router.post("/notes", status_code=201)
def add_note(request: Request, text_: str, db: SessionDep) -> Any:
    request.app.state.seen["handler_thread"] = threading.get_ident()
    db.execute(text("INSERT INTO t (name) VALUES (:n)"), {"n": text_})
    return {"ok": True}


@router.get("/ping")
def ping() -> dict[str, str]:  # no session: nothing to commit
    return {"pong": "yes"}


def _build(tmp_path: Path, seen: Seen) -> FastAPI:
    engine = make_engine(f"sqlite:///{tmp_path / 'approute.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"))

    @event.listens_for(engine, "commit")
    def _on_commit(_conn: Any) -> None:
        seen.setdefault("commit_threads", []).append(threading.get_ident())

    app = FastAPI(dependencies=[Depends(on_loop)])
    app.state.engine = engine
    app.state.seen = seen
    app.include_router(router)
    return app


@pytest.fixture
def seen() -> Seen:
    return {}


@pytest.fixture
def small(tmp_path: Path, seen: Seen) -> Iterator[TestClient]:
    app = _build(tmp_path, seen)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
    app.state.engine.dispose()


def _names(c: TestClient) -> list[str]:
    engine = c.app.state.engine  # type: ignore[attr-defined]
    with Session(engine) as s:
        return [r[0] for r in s.execute(text("SELECT name FROM t ORDER BY id"))]


@pytest.fixture
def thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every worker-thread call made (FastAPI's, Starlette's and ours go through anyio)."""
    import anyio.to_thread

    calls: list[Any] = []
    real = anyio.to_thread.run_sync

    async def counting(func: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return calls


def test_handler_and_commit_take_one_worker_thread_call(
    small: TestClient, seen: Seen, thread_calls: list[Any]
) -> None:
    r = small.post("/notes?text_=a")
    assert r.status_code == 201 and r.json() == {"ok": True}
    assert _names(small) == ["a"]
    # FastAPI alone: the handler, then the session's end: two calls
    assert len(thread_calls) == 1
    worker = seen["handler_thread"]
    assert worker != seen["loop"]  # database work never on the event loop
    assert seen["commit_threads"][-1] == worker  # committed there, before the answer


def test_a_dependency_that_reads_the_database_keeps_its_own_call(
    small: TestClient, seen: Seen, thread_calls: list[Any]
) -> None:
    r = small.post("/items?name=a", headers={"x-user": "ann"})
    assert r.status_code == 201 and r.json() == {"ok": True}
    assert _names(small) == ["a:ann:ANN"]
    # who, who_again (FastAPI's own calls), then the handler with the commit
    assert len(thread_calls) == 3
    assert len(seen["dep_threads"]) == 1  # cached: called once
    assert seen["commit_threads"][-1] == seen["handler_thread"] != seen["loop"]


def test_an_error_rolls_back_and_answers_as_before(small: TestClient) -> None:
    r = small.post("/items?name=boom", headers={"x-user": "ann"})
    assert r.status_code == 409 and r.json() == {"detail": "boom"}
    assert _names(small) == []


def test_dependencies_still_refuse_before_the_handler(small: TestClient, seen: Seen) -> None:
    assert small.post("/items?name=a").status_code == 401
    assert small.post("/items?name=a", headers={"x-user": "a", "x-deny": "1"}).status_code == 403
    assert "handler_thread" not in seen and _names(small) == []


def test_a_refusing_dependency_still_answers_before_parameter_errors(small: TestClient) -> None:
    # no name (a 422 on its own), no user: the dependency's 401 wins, as with FastAPI's
    # own handler, which runs dependencies before it looks at the parameters' errors
    assert small.post("/items").status_code == 401
    r = small.post("/items", headers={"x-user": "ann"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "name"]


def test_response_model_status_and_headers_as_fastapi_builds_them(small: TestClient) -> None:
    assert small.post("/items?name=a", headers={"x-user": "ann"}).status_code == 201
    r = small.get("/items/1", headers={"x-user": "bob"})
    assert r.status_code == 203 and r.headers["x-seen-by"] == "bob"
    assert r.json() == {"id": 1, "name": "a:ann:ANN"}  # secret excluded, as declared
    assert r.headers["content-type"] == "application/json"
    assert small.get("/items/9", headers={"x-user": "bob"}).status_code == 404
    assert small.get("/bad", headers={"x-user": "bob"}).status_code == 500


def test_dependency_overrides_are_honoured(small: TestClient, seen: Seen) -> None:
    app = small.app
    app.dependency_overrides[who] = lambda: "zed"  # type: ignore[attr-defined]
    try:
        r = small.post("/items?name=o")
    finally:
        app.dependency_overrides.clear()  # type: ignore[attr-defined]
    assert r.status_code == 201 and _names(small) == ["o:zed:ZED"]


def _takes_session(dependant: Any) -> bool:
    return dependant.call is get_session or any(_takes_session(d) for d in dependant.dependencies)


def test_every_route_that_takes_a_session_commits_in_its_handlers_call() -> None:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url="sqlite://"))

    def routes(container: Any) -> Iterator[Any]:
        for route in getattr(container, "routes", []):
            if isinstance(route, APIRoute):
                yield route
            elif hasattr(route, "original_router"):
                yield from routes(route.original_router)

    found = list(routes(app))
    with_session = [r for r in found if _takes_session(r.dependant)]
    assert len(with_session) > 50
    # their routers were built with route_class=AppRoute, their def handlers wrapped
    assert all(isinstance(r, AppRoute) for r in with_session)
    assert all(hasattr(r.endpoint, "__wrapped__") for r in with_session)
    wrapped = {r.path for r in found if hasattr(r.endpoint, "__wrapped__")}
    assert {"/deploy", "/api/v1/orders", "/healthz"} <= wrapped


def test_a_handler_without_a_session_takes_one_call_too(
    small: TestClient, thread_calls: list[Any]
) -> None:
    # FastAPI alone: the handler, then the response model's validation: two calls
    assert small.get("/ping").json() == {"pong": "yes"}
    assert len(thread_calls) == 1
