"""Every user-visible string has a Simplified Chinese translation."""

from __future__ import annotations

from app import i18n_tools
from app.web.i18n import negotiate


def test_every_marked_string_is_translated() -> None:
    missing = i18n_tools.missing("zh_CN")
    listing = "\n".join(f"{w[0]}: {m!r}" for m, w in sorted(missing.items())[:40])
    assert not missing, (
        f"{len(missing)} untranslated strings (run `python -m app i18n missing`):\n{listing}"
    )


def test_negotiation_prefers_cookie_then_accept_language() -> None:
    assert negotiate("zh_CN", "en-US,en;q=0.9") == "zh_CN"
    assert negotiate(None, "zh-CN,zh;q=0.9,en;q=0.8") == "zh_CN"
    assert negotiate(None, "en-GB,en;q=0.9,zh;q=0.5") == "en"
    assert negotiate(None, "fr-FR") == "en"
    assert negotiate("xx", None) == "en"


def test_a_string_in_two_domains_reads_the_same_in_both() -> None:
    """The compiled catalogue keeps the first .po file's translation of a string that two
    domains share; a different one further on is never shown, and a translator fixing it
    there changes nothing (7 such pairs had drifted apart)."""
    from babel.messages.pofile import read_po

    seen: dict[str, tuple[str, object]] = {}
    drift = []
    for po in sorted((i18n_tools.SRC / "zh_CN").glob("*.po")):
        with po.open("rb") as f:
            for m in read_po(f, locale="zh_CN"):
                if not m.id or not m.string:
                    continue
                key = m.id if isinstance(m.id, str) else m.id[0]
                first = seen.setdefault(key, (po.name, m.string))
                if first[1] != m.string:
                    drift.append(f"{first[0]} / {po.name}: {key[:60]!r}")
    assert not drift, "\n".join(drift)
