"""The number rule's errors (``app.numbers.NumberError``) as translated messages.

Every form that parses a typed number with ``app.numbers`` shows ``number_message(e)`` next
to the field with a 422; the codes are stable, the wording lives here (and in
``translations/zh_CN/core.po``).
"""

from __future__ import annotations

from app.errors import N_
from app.numbers import NumberError
from app.web.i18n import gettext

MSGIDS = {
    "number.empty": N_("Enter a number."),
    "number.invalid": N_("Enter a number using the digits 0–9."),
    "number.not_whole": N_("Enter a whole number."),
    "number.negative": N_("Enter a number that is not negative."),
    "number.too_small": N_("Enter at least {min}."),
    "number.too_large": N_("Enter at most {max}."),
    "money.decimals": N_("Use at most two decimal places."),
    "money.exponent": N_("Write the amount out in full (no exponent)."),
    "tokens.unit": N_("Use a plain number, an exponent (1.5e12) or a suffix K, M, B, T, 万 or 亿."),
}


def number_message(e: NumberError) -> str:
    """The translated message for a refused number, its parameters filled in."""
    msgid = MSGIDS.get(e.code, MSGIDS["number.invalid"])
    try:
        return gettext(msgid).format(**e.shown_params)
    except (KeyError, IndexError):
        return gettext(MSGIDS["number.invalid"])
