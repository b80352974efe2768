"""The house rules that keep the code base navigable.

- Pure cores (the sizing engine and every rules module) import no web or database framework.
- Nothing outside app/clock.py reads the wall clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
    allowed_extra = {"app.errors", "app.money"}  # stdlib-only at import time
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
