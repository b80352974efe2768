"""Regenerate migrations/versions/0001_initial.py from the models.

Until the first release, the schema is one initial migration regenerated from the
models (nothing is deployed whose data must be migrated). After the first release, add
new revisions with `make migration m="what changed"` instead and never edit old ones.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from alembic import command

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.migrate import alembic_config  # noqa: E402

target = ROOT / "migrations" / "versions" / "0001_initial.py"
if target.exists():
    target.unlink()
with tempfile.TemporaryDirectory() as d:
    url = f"sqlite:///{d}/empty.db"
    cfg = alembic_config(url)
    command.revision(
        cfg,
        message="initial schema",
        autogenerate=True,
        rev_id="0001",
    )
produced = next((ROOT / "migrations" / "versions").glob("0001_*.py"))
if produced != target:
    produced.rename(target)
print(f"wrote {target.relative_to(ROOT)}")
