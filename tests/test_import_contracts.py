"""The import contracts of pyproject.toml (run by `make lint`): they hold for the code base,
and a planted violation makes them fail."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def run_contracts(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def planted_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(
        ROOT / "app", root / "app", ignore=shutil.ignore_patterns("locale", "__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.skipif(
    not LINT.exists(), reason="lint-imports is a dev dependency (pip install -e '.[dev]')"
)
def test_the_code_base_keeps_every_contract() -> None:
    r = run_contracts(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


@pytest.mark.skipif(
    not LINT.exists(), reason="lint-imports is a dev dependency (pip install -e '.[dev]')"
)
@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # a service reaching into another domain's routes
        (
            "app/catalog/service.py",
            "from app.quotes import routes as _r",
            "A service imports no routes",
        ),
        # a domain reading another domain's tables instead of its service
        (
            "app/orders/service.py",
            "from app.catalog.models import Node as _N",
            "catalog tables only through app.catalog.service",
        ),
        # a table module reaching up to its service
        ("app/quotes/models.py", "from app.quotes import service as _s", "Each domain"),
        # a service reaching the web through another module (indirectly)
        ("app/ledger/receipts.py", "from app.accounts import deps as _d", "A service imports"),
        # a router named like no other router is still a router
        ("app/catalog/service.py", "from app.orders import control_routes as _c", "Nothing"),
    ],
)
def test_a_planted_violation_fails(tmp_path: Path, module: str, line: str, contract: str) -> None:
    root = planted_copy(tmp_path)
    target = root / module
    text = target.read_text(encoding="utf-8")
    head, sep, rest = text.partition("\nfrom ")
    target.write_text(head + "\n" + line + "  # noqa\n" + sep.lstrip("\n") + rest, encoding="utf-8")
    r = run_contracts(root)
    assert r.returncode != 0, r.stdout
    broken = [ln for ln in r.stdout.splitlines() if ln.rstrip().endswith("BROKEN")]
    assert any(b.startswith(contract) for b in broken), r.stdout
    assert line.split(" import ")[0].removeprefix("from ") in r.stdout


# ---------------------------------------------------------------------------------------
# The contracts cover the house: every domain module in a layer, every router by what it
# is, no import circle, function-level imports only where they say why.
# ---------------------------------------------------------------------------------------

APP = ROOT / "app"


def contracts() -> dict[str, dict[str, Any]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in data["tool"]["importlinter"]["contracts"]}


def _names(layer: str) -> set[str]:
    return {n.strip(" ()") for n in re.split(r"[:|]", layer) if n.strip(" ()")}


def _matches(module: str, patterns: list[str]) -> bool:
    """import-linter's wildcards: ``*`` is one whole segment; a pattern covers submodules."""
    for pattern in patterns:
        parts, mod = pattern.split("."), module.split(".")
        if len(mod) >= len(parts) and all(p in ("*", m) for p, m in zip(parts, mod)):
            return True
    return False


def test_every_module_of_every_domain_sits_in_a_layer() -> None:
    layers = contracts()["layers"]
    named = set().union(*(_names(layer) for layer in layers["layers"]))
    missing = [
        f"{container}.{path.stem}"
        for container in layers["containers"]
        for path in sorted((APP / container.split(".")[1]).glob("*.py"))
        if path.stem != "__init__" and path.stem not in named
    ]
    assert not missing, f"modules in no layer (add them to [tool.importlinter] layers): {missing}"


def router_modules() -> list[str]:
    """Modules that define an APIRouter: routers by what they are, whatever their name."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and "APIRouter" in ast.unparse(node.func):
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
                break
    return found


def test_every_router_is_covered_by_the_routes_rules() -> None:
    routers = router_modules()
    assert "app.orders.control_routes" in routers and "app.api.orders" in routers
    below = contracts()["no-routes-below"]["forbidden_modules"]
    services = contracts()["services-no-web"]["forbidden_modules"]
    top = _names(contracts()["layers"]["layers"][0])
    for module in routers:
        assert _matches(module, below), f"{module} is a router: add it to no-routes-below"
        assert _matches(module, services), f"{module} is a router: add it to services-no-web"
        parts = module.split(".")
        if f"app.{parts[1]}" in contracts()["layers"]["containers"]:
            assert parts[2] in top, f"{module} is a router: it belongs in the top layer"


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of app modules (function-level imports included)."""
    graph = grimp.build_graph("app", exclude_type_checking_imports=True)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_circle_in_app() -> None:
    assert import_cycles() == []


# Function-level imports need a reason: a CLI entry point (imports what the command needs,
# not what every command needs), or a comment on the import or the line above that says
# which cycle or which cost it avoids.
CLI_ENTRY_POINTS = ("app/__main__.py", "app/sizing/__main__.py", "app/*/cli.py")
REASON = re.compile(r"#.*\b(cycle|circular|cost|slow|heavy|optional|lazy)", re.IGNORECASE)


def function_level_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if any(fnmatch.fnmatch(rel, p) for p in CLI_ENTRY_POINTS):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        seen: set[int] = set()
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno not in seen:
                    seen.add(node.lineno)
                    near = lines[node.lineno - 1] + " " + lines[node.lineno - 2]
                    if not REASON.search(near):
                        found.append(f"{rel}:{node.lineno} {lines[node.lineno - 1].strip()}")
    return found


def test_function_level_imports_say_why() -> None:
    found = function_level_imports(APP)
    assert not found, "function-level imports without a reason:\n" + "\n".join(found)


def test_the_function_level_check_catches_one(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text(
        "def f():\n"
        "    import json\n"
        "    return json\n"
        "def g():\n"
        "    # lazy: the PDF library costs 80 ms to import\n"
        "    import fpdf\n"
        "    return fpdf\n",
        encoding="utf-8",
    )
    assert function_level_imports(tmp_path / "app") == ["app/m.py:2 import json"]
