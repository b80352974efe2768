"""Dead code in app/: what app/ defines and nothing calls (``make lint`` runs this).

vulture reads app/ together with everything that may call into it (tests, bench, tools,
scripts) and reports the functions, classes, methods, properties and imports of app/ that no
code uses, and code that can never run. Left out, because a framework reads them and vulture
cannot see it: attributes and variables (SQLModel / pydantic fields, ``model_config``, ORM
columns a service sets), route handlers and validators (registered by their decorators), and
the few names below that only a template or a library calls. A finding is fixed by deleting
the code; a name called from outside Python goes in ``CALLED_ELSEWHERE`` with where.

    .venv/bin/python scripts/deadcode.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parent.parent
CALLERS = ("app", "tests", "bench", "tools", "scripts")
REPORTED = {"function", "class", "method", "property", "import", "unreachable_code"}
# registered by a decorator: FastAPI routes, SQLAlchemy event listeners, pydantic validators
DECORATORS = ["@router.*", "@event.listens_for", "@field_validator", "@model_validator"]
CALLED_ELSEWHERE = [
    "type_label",  # templates/accounts/account.html (an SSH key's type)
    "network_label",  # templates/orders/_controls.html (the private network's status)
    "process_bind_param",  # SQLAlchemy TypeDecorator hooks (app/db.py)
    "process_result_value",
]


def sources() -> list[str]:
    """The project's own Python files under ``CALLERS``: what git tracks or would track (not
    the virtual environments and build outputs it ignores, such as tools/launch/.venv)."""
    try:
        out = subprocess.run(  # noqa: S603
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *CALLERS],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: skip hidden folders
        files = [f for p in CALLERS for f in (ROOT / p).rglob("*.py")]
        return [
            str(f) for f in files if not any(p.startswith(".") for p in f.relative_to(ROOT).parts)
        ]
    return [str(ROOT / f) for f in out.splitlines() if f.endswith(".py") and (ROOT / f).exists()]


def findings() -> list[str]:
    v = Vulture(ignore_names=CALLED_ELSEWHERE, ignore_decorators=DECORATORS)
    v.scavenge(sources())
    app = ROOT / "app"
    return [
        item.get_report()
        for item in v.get_unused_code(min_confidence=60)
        if item.typ in REPORTED and Path(item.filename).is_relative_to(app)
    ]


def main() -> int:
    found = findings()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} unused in app/ (scripts/deadcode.py says how to fix or allow one)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
