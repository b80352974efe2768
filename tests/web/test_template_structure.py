"""Template structure: stylesheets go in <head> (``{% block head %}``), titles are text."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
BLOCK = re.compile(r"\{% block (\w+) %\}(.*?)\{% endblock %\}", re.S)


def blocks(path: Path) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))}


def test_no_stylesheet_inside_main() -> None:
    offenders = [
        str(p.relative_to(TEMPLATES))
        for p in TEMPLATES.rglob("*.html")
        if 'rel="stylesheet"' in blocks(p).get("content", "")
    ]
    assert offenders == []


def test_base_has_a_head_block() -> None:
    head = (TEMPLATES / "base.html").read_text(encoding="utf-8").split("</head>")[0]
    assert "{% block head %}{% endblock %}" in head


def test_titles_hold_no_markup() -> None:
    offenders = [
        str(p.relative_to(TEMPLATES))
        for p in TEMPLATES.rglob("*.html")
        if re.search(r"<[a-z]", blocks(p).get("title", ""))
    ]
    assert offenders == []
