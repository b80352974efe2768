"""The house rules that keep the code base navigable.

- Pure cores (the sizing engine and every rules module) import no web or database framework.
- Nothing outside app/clock.py reads the wall clock.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from app.web.deps import SessionDep  # resolved by name in the checker's own test

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
FORBIDDEN = {"fastapi", "starlette", "sqlmodel", "sqlalchemy", "jinja2"}
# Pure modules: the sizing package, the catalog loader, and each domain's rules module.
PURE_NAMES = {
    "rules.py",
    "postings.py",
    "specs.py",
    "lifecycle.py",
    "pricing.py",
    "promise.py",
}


def pure_files() -> list[Path]:
    files = list((APP / "sizing").rglob("*.py"))
    files += [p for p in APP.rglob("*.py") if p.name in PURE_NAMES]
    return files


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def imported_app_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app."):
            mods.add(node.module)
        elif isinstance(node, ast.Import):
            mods |= {a.name for a in node.names if a.name.startswith("app.")}
    return mods


def test_pure_cores_import_no_framework() -> None:
    offenders = {}
    for f in pure_files():
        bad = imported_roots(f) & FORBIDDEN
        if bad:
            offenders[str(f.relative_to(ROOT))] = sorted(bad)
    assert not offenders, f"pure modules importing frameworks: {offenders}"


def test_pure_cores_import_only_pure_app_modules() -> None:
    pure = {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in pure_files()}
    pure |= {m.rsplit(".", 1)[0] for m in pure if m.endswith(".__init__")}
    # standard library (and Babel) only at import time: errors, money, numbers, translations
    allowed_extra = {"app.errors", "app.money", "app.numbers", "app.i18n"}
    offenders = {}
    for f in pure_files():
        bad = {
            m
            for m in imported_app_modules(f)
            if m not in pure and m not in allowed_extra and not m.startswith("app.sizing")
        }
        if bad:
            offenders[str(f.relative_to(ROOT))] = sorted(bad)
    assert not offenders, f"pure modules importing non-pure app modules: {offenders}"


def test_app_errors_and_money_import_no_framework_at_import_time() -> None:
    for name in ("errors.py",):
        assert not (imported_roots_top_level(APP / name) & FORBIDDEN)


def imported_roots_top_level(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def wall_clock_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            base = node.func.value
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
            if attr in ("now", "utcnow", "today") and base_name in ("datetime", "date"):
                lines.append(node.lineno)
            if attr in ("time", "time_ns") and base_name in ("time", "_time"):
                lines.append(node.lineno)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "time"
            and any(a.name in ("time", "time_ns") for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_clock_reads_the_wall_clock() -> None:
    offenders = {}
    for f in APP.rglob("*.py"):
        if f == APP / "clock.py":
            continue
        hits = wall_clock_calls(f)
        if hits:
            offenders[str(f.relative_to(ROOT))] = hits
    assert not offenders, f"wall-clock reads outside app/clock.py: {offenders}"


def test_the_checker_catches_a_wall_clock_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import datetime\nx = datetime.datetime.now()\nimport time\ny = time.time()\n")
    assert wall_clock_calls(bad) == [2, 4]


# ---------------------------------------------------------------------------------------
# Handlers that touch the database are synchronous (issue 13: an `async def` handler that
# waits on a lock blocks the event loop, and with it every other request of the process).
# ---------------------------------------------------------------------------------------


def _async_db_handlers(app: object) -> list[str]:
    """Routes whose handler, or any dependency on the way to a DB session, is ``async def``."""
    import inspect

    from app.web.deps import get_session

    def takes_session(dep: object) -> bool:
        if getattr(dep, "call", None) is get_session:
            return True
        return any(takes_session(d) for d in getattr(dep, "dependencies", []))

    def async_with_session(dep: object) -> list[str]:
        found = []
        call = getattr(dep, "call", None)
        # AppRoute hands FastAPI an async wrapper that runs the declared ``def`` handler in
        # a worker thread: the declared one is what must not be async
        call = inspect.unwrap(call) if call is not None else None
        if call is not None and inspect.iscoroutinefunction(call) and takes_session(dep):
            found.append(getattr(call, "__qualname__", repr(call)))
        for d in getattr(dep, "dependencies", []):
            found += async_with_session(d)
        return found

    offenders = []
    for route in api_routes(app):
        for name in async_with_session(route.dependant):
            offenders.append(f"{sorted(route.methods)} {route.path}: {name}")
    return offenders


def api_routes(app_or_router: object) -> list[Any]:
    """Every APIRoute, through included routers (FastAPI keeps them nested)."""
    from fastapi.routing import APIRoute

    out: list[Any] = []
    for route in getattr(app_or_router, "routes", []):
        if isinstance(route, APIRoute):
            out.append(route)
        elif hasattr(route, "original_router"):
            out += api_routes(route.original_router)
    return out


def test_no_async_handler_takes_a_database_session() -> None:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url="sqlite://"))
    offenders = _async_db_handlers(app)
    assert not offenders, f"async def handlers/dependencies that take a DB session: {offenders}"
    # The walk sees sessions at all (a check that finds nothing proves nothing).
    deploy = next(r for r in api_routes(app) if r.path == "/deploy" and "POST" in r.methods)
    assert "get_session" in repr(deploy.dependant)
    assert not offenders, f"async def handlers/dependencies that take a DB session: {offenders}"


def test_the_async_handler_check_catches_one() -> None:
    from fastapi import Depends, FastAPI

    app = FastAPI()

    @app.post("/x")
    async def bad(session: SessionDep) -> None:  # pragma: no cover - never called
        return None

    async def dep(session: SessionDep) -> None:  # pragma: no cover - never called
        return None

    @app.get("/y", dependencies=[Depends(dep)])
    def good_but_async_dep() -> None:  # pragma: no cover - never called
        return None

    @app.get("/z")
    def fine(session: SessionDep) -> None:  # pragma: no cover - never called
        return None

    found = _async_db_handlers(app)
    assert len(found) == 2
    assert any("/x" in f for f in found) and any("/y" in f for f in found)


def test_no_async_route_handler_in_route_modules_reads_the_engine() -> None:
    """Belt and braces for handlers that open a session by hand (``request.app.state.engine``,
    ``transaction(...)``): an ``async def`` in a routes module may touch neither directly."""
    offenders = []
    for f in APP.rglob("*routes.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.AsyncFunctionDef):
                continue
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.FunctionDef | ast.Lambda):
                        break  # work handed to a thread is fine
                    if isinstance(sub, ast.Name) and sub.id in ("SessionDep", "Session"):
                        offenders.append(f"{f.relative_to(ROOT)}:{node.name}")
                    if isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "transaction":
                        offenders.append(f"{f.relative_to(ROOT)}:{node.name}")
    assert not offenders, offenders


# ---------------------------------------------------------------------------------------
# docs/architecture.md's "Where to add" table names real paths
# ---------------------------------------------------------------------------------------


def where_to_add_paths() -> dict[str, list[str]]:
    """Each row of the table: what to add → the repository paths it names."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where to add", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("to add", "---"):
            continue
        found = re.findall(r"`([\w./<>-]+)`", cells[1])
        rows[cells[0]] = [p for p in found if "/" in p or p.endswith((".toml", ".py"))]
    return rows


def test_where_to_add_names_real_paths() -> None:
    rows = where_to_add_paths()
    wanted = {
        "a field on the order page",
        "a node type (SKU)",
        "a ledger entry kind",
        "a route",
        "a table",
        "a framework profile (sizing)",
    }
    assert wanted <= set(rows), sorted(rows)
    missing = [
        f"{what}: {p}" for what, paths in rows.items() for p in paths if not (ROOT / p).exists()
    ]
    assert all(rows[w] for w in wanted), rows
    assert not missing, missing
