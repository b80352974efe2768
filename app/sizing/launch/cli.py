"""``python -m app.sizing --launch FRAMEWORK [--option N] [--out DIR] ...request flags``.

Prints the same JSON document ``POST /api/v1/sizing/launch`` answers (files and
predictions); ``--out DIR`` also writes each file there. A refusal exits with status 2 and
the reason, its code and the frameworks that can run the layout on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.sizing.errors import SizingError
from app.sizing.launch import FRAMEWORKS, LaunchError, export_launch, launch_json


def emit(request: dict[str, Any], option: int, framework: str, out: str | None) -> int:
    try:
        bundle = export_launch(request, option, framework)
    except SizingError as e:
        json.dump(e.as_dict(), sys.stderr, ensure_ascii=False)
        sys.stderr.write("\n")
        return 2
    except LaunchError as e:
        json.dump({"errors": [e.as_dict()]}, sys.stderr, ensure_ascii=False)
        sys.stderr.write("\n")
        return 2
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        for f in bundle.files:
            (folder / f.name).write_text(f.content, encoding="utf-8")
    sys.stdout.write(launch_json(bundle) + "\n")
    return 0


CHOICES = tuple(FRAMEWORKS)
