"""No private name of FastAPI, Starlette, SQLAlchemy/SQLModel or uvicorn in app/.

A private name (``_x``) is no promise: any upgrade may rename or remove it, silently. The
app imports none (``from fastapi.routing import _x``, ``import starlette._utils``), reaches
none on another object (``order._sa_class_manager``, ``getattr(x, "_sa_...")``), and a
subclass of a framework class never reads or writes one of the framework's own private
attributes on ``self`` (``self._json`` in a ``Request`` subclass). Private names of our own
modules and classes are fine: a name the app defines itself is ours.
"""

from __future__ import annotations

import ast
import sysconfig
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
FRAMEWORKS = ("fastapi", "starlette", "sqlalchemy", "sqlmodel", "uvicorn")
# Not a framework's: the standard library's documented underscore names.
STDLIB = frozenset({"_SubParsersAction", "_replace", "_asdict", "_fields", "_make"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _framework_module(name: str | None) -> bool:
    return bool(name) and str(name).split(".")[0] in FRAMEWORKS


@cache
def framework_privates() -> frozenset[str]:
    """Every private attribute and method name the frameworks define."""
    site = Path(sysconfig.get_paths()["purelib"])
    names: set[str] = set()
    for pkg in FRAMEWORKS:
        for path in (site / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
    return frozenset(n for n in names if _private(n))


def _trees(root: Path) -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(root.parent)), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(root.rglob("*.py"))
    ]


def _own_names(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """The private names the app itself defines (functions, classes, variables, attributes)."""
    own: set[str] = set()
    for _path, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif isinstance(node, ast.alias):
                own.add(node.asname or node.name.split(".")[0])
    return own


def _framework_classes(tree: ast.Module) -> set[str]:
    """Names a module imported from a framework (to spot ``class X(Request)``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _framework_module(node.module):
            found |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.asname or a.name for a in node.names if _framework_module(a.name)}
    return found


def private_framework_uses(root: Path) -> list[str]:
    trees = _trees(root)
    own = _own_names(trees)
    hits: list[str] = []
    for path, tree in trees:
        imported = _framework_classes(tree)
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and _framework_module(node.module):
                parts = str(node.module).split(".") + [a.name for a in node.names]
                hits += [f"{where} imports {node.module}.{p}" for p in parts if _private(p)]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if _framework_module(a.name) and any(map(_private, a.name.split("."))):
                        hits.append(f"{where} imports {a.name}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                if node.attr not in own and node.attr not in STDLIB:
                    hits.append(f"{where} reaches .{node.attr}")
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") in ("getattr", "setattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and node.args[1].value not in own
            ):
                hits.append(f"{where} reaches {node.args[1].value!r}")
            elif isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if not bases & imported:
                    continue
                for sub in ast.walk(node):
                    if (
                        isinstance(sub, ast.Attribute)
                        and getattr(sub.value, "id", "") in ("self", "cls")
                        and sub.attr in framework_privates()
                    ):
                        hits.append(f"{path}:{sub.lineno} {node.name} uses self.{sub.attr}")
    return sorted(set(hits))


def test_app_uses_no_private_name_of_a_framework() -> None:
    hits = private_framework_uses(APP)
    assert not hits, "private framework names in app/:\n" + "\n".join(hits)


def test_the_check_catches_each_kind(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "bad.py").write_text(
        "from fastapi.routing import _effective_route_context_var\n"
        "import starlette._utils\n"
        "from sqlalchemy.orm import Session\n"
        "from starlette.requests import Request\n"
        "def f(order, s: Session):\n"
        "    order._sa_class_manager.new_instance()\n"
        "    return getattr(order, '_sa_instance_state')\n"
        "class R(Request):\n"
        "    async def json(self):\n"
        "        self._json = 1\n"
        "        return self._json\n"
        "class Mine:\n"
        "    def __init__(self):\n"
        "        self._ours = 1\n"
        "    def get(self):\n"
        "        return self._ours\n",
        encoding="utf-8",
    )
    text = "\n".join(private_framework_uses(tmp_path / "app"))
    assert "_effective_route_context_var" in text
    assert "starlette._utils" in text
    assert "._sa_class_manager" in text
    assert "'_sa_instance_state'" in text
    assert "R uses self._json" in text
    assert "_ours" not in text
