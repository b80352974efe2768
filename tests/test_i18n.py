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
