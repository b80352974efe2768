"""Find ASCII punctuation used as Chinese punctuation on a rendered Chinese page.

``ascii_punctuation(html)`` reads the visible text line by line — inline tags (links,
``<strong>``, ``<sup>``, ``<time>`` …) do not break a line, block tags do — and reports
``: , ; ( )`` next to a Chinese character or full-width mark, ``? !`` after one, and ASCII
parentheses around Chinese words: Chinese text takes ``： ， ； （ ） ？ ！``. Digit grouping
(``1,800``), times (``09:00``), addresses and Latin-only text are left alone, having no
Chinese character beside the mark; code (``<code>``, ``<pre>``, ``<kbd>``) is not text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# CJK symbols and punctuation (、。「」), ideographs, full-width forms (：，（）).
_HAN = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_BESIDE = re.compile(rf"[{_HAN}][ \t]*[:,;()?!]|[:,;()][ \t]*[{_HAN}]")
_PARENS = re.compile(rf"\([^()\n]*[{_HAN}][^()\n]*\)")
_INLINE = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "cite",
        "data",
        "dfn",
        "em",
        "i",
        "mark",
        "q",
        "s",
        "small",
        "span",
        "strong",
        "sub",
        "sup",
        "time",
        "u",
        "var",
    ]
)
_CODE = frozenset({"code", "pre", "kbd", "samp"})
_SKIP = frozenset({"script", "style", "template", "title"})


class _Lines(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        elif tag in _CODE:
            if not self._code:
                self.parts.append(" x ")  # a word, not Chinese, not punctuation
            self._code += 1
        elif tag not in _INLINE:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self._skip:
            self._skip -= 1
        elif tag in _CODE and self._code:
            self._code -= 1
        elif tag not in _INLINE:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip and not self._code:
            self.parts.append(" ".join(data.split()) if "\n" in data else data)


def visible_lines(html: str) -> list[str]:
    p = _Lines()
    p.feed(html)
    p.close()
    return [line.strip() for line in "".join(p.parts).split("\n") if line.strip()]


def ascii_punctuation(html: str) -> list[str]:
    """Each offending mark once, with a little of its line around it."""
    found: list[str] = []
    for line in visible_lines(html):
        marks: set[int] = set()
        for m in _BESIDE.finditer(line):
            marks.update(i for i in range(m.start(), m.end()) if line[i] in ":,;()?!")
        for m in _PARENS.finditer(line):
            marks.update((m.start(), m.end() - 1))
        found.extend(line[max(0, i - 12) : i + 12] for i in sorted(marks))
    return found
