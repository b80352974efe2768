"""The web layer's name for ``app.i18n`` (the locale lives there, framework-free, so services
can translate without importing the web layer)."""

from app.i18n import (
    COOKIE,
    LOCALE_DIR,
    LOCALE_NAMES,
    LOCALES,
    TRANSLATIONS_SRC,
    babel_locale,
    current_locale,
    gettext,
    labelled,
    negotiate,
    ngettext,
    punct,
    set_locale,
    translations_for,
)

_ = gettext

__all__ = [
    "COOKIE",
    "LOCALES",
    "LOCALE_DIR",
    "LOCALE_NAMES",
    "TRANSLATIONS_SRC",
    "_",
    "babel_locale",
    "current_locale",
    "gettext",
    "labelled",
    "negotiate",
    "ngettext",
    "punct",
    "set_locale",
    "translations_for",
]
