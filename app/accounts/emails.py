"""Email addresses: one normal form and a strict-enough syntax check (standard library only).

Normal form: surrounding whitespace removed, Unicode NFC, the whole address lower-cased
(we treat ``Ann@Example.com`` and ``ann@example.com`` as the same account; no mail
provider in practice hands those to different people), the domain IDNA-encoded. The check
accepts what people really use (dots, plus tags, hyphens, IDN domains) and refuses what
would break mail or hide tricks (quoted local parts, IP-literal domains, spaces, control
characters, consecutive dots, single-label domains).
"""

from __future__ import annotations

import re
import unicodedata

from app.errors import N_

MAX_EMAIL = 254
_LOCAL_RE = re.compile(r"^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")
_LABEL_RE = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_TLD_RE = re.compile(r"^([a-z]{2,63}|xn--[a-z0-9-]{1,59})$")


class EmailError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def normalise_email(raw: str | None) -> str:
    """Return the normal form of an address or raise ``EmailError`` with a user message."""
    text = unicodedata.normalize("NFC", (raw or "").strip())
    if not text:
        raise EmailError(N_("Enter your email address."))
    if len(text) > MAX_EMAIL or any(
        ch.isspace() or unicodedata.category(ch)[0] == "C" for ch in text
    ):
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    if text.count("@") != 1:
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    local, domain = text.rsplit("@", 1)
    local = local.lower()
    domain = (
        domain.lower().rstrip(".")
        if domain.endswith(".") and not domain.endswith("..")
        else domain.lower()
    )
    try:
        ascii_domain = domain.encode("idna").decode("ascii") if domain else ""
    except UnicodeError:
        raise EmailError(N_("Enter a valid email address, like name@example.com.")) from None
    if not local or len(local) > 64 or not _LOCAL_RE.match(local):
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    labels = ascii_domain.split(".")
    if len(labels) < 2 or not all(_LABEL_RE.match(label) for label in labels):
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    if not _TLD_RE.match(labels[-1]):
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    email = f"{local}@{ascii_domain}"
    if len(email) > MAX_EMAIL:
        raise EmailError(N_("Enter a valid email address, like name@example.com."))
    return email


def looks_like_email(raw: str | None) -> str | None:
    """The normal form, or None when the text is not an address (never raises)."""
    try:
        return normalise_email(raw)
    except EmailError:
        return None
