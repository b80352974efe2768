"""The import contracts of pyproject.toml (run by `make lint`): they hold for the code base,
and a planted violation makes them fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
