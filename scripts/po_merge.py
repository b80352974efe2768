"""Add or update translations in one domain's .po file from a JSON object {msgid: msgstr}.

    python scripts/po_merge.py translations/zh_CN/orders.po new.json

Each domain keeps its own file so people working on different parts never edit the same
file; `python -m app i18n compile` merges them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po


def main(po_path: str, json_path: str) -> int:
    po = Path(po_path)
    if po.exists():
        with po.open("rb") as f:
            cat = read_po(f, locale="zh_CN")
    else:
        cat = Catalog(locale="zh_CN", project="gpunodes")
    new = json.loads(Path(json_path).read_text(encoding="utf-8"))
    for mid, text in new.items():
        cat.add(mid, text)
    po.parent.mkdir(parents=True, exist_ok=True)
    with po.open("wb") as f:
        write_po(f, cat, width=100, sort_output=True)
    print(f"{po}: {len(new)} entries added or updated, {len(cat)} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
