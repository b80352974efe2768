"""The web layer's name for ``app.i18n`` (the locale lives there, framework-free, so services
can translate without importing the web layer)."""

from app.i18n import (
    COOKIE,
    LOCALE_DIR,
    LOCALE_NAMES,
    LOCALES,
    TRANSLATIONS_SRC,
    ZONE_COOKIE,
    babel_locale,
    current_locale,
    current_zone,
    full_stop,
    gettext,
    known_zone,
    labelled,
    negotiate,
    ngettext,
    punct,
    set_locale,
    set_zone,
    translations_for,
    zone_info,
    zone_label,
)

_ = gettext

__all__ = [
    "COOKIE",
    "LOCALES",
    "LOCALE_DIR",
    "LOCALE_NAMES",
    "TRANSLATIONS_SRC",
    "ZONE_COOKIE",
    "_",
    "babel_locale",
    "current_locale",
    "current_zone",
    "full_stop",
    "gettext",
    "known_zone",
    "labelled",
    "negotiate",
    "ngettext",
    "punct",
    "set_locale",
    "set_zone",
    "translations_for",
    "zone_info",
    "zone_label",
]
