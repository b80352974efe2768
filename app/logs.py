"""Logging, configured once per process at start (``configure``), never in ``create_app``.

- One format for the app, the worker and uvicorn.
- uvicorn's access log goes through ``RedactingFilter``: secret-bearing paths (password
  reset links, quote share links) and secret-looking query strings never reach a log.
- No log line can be forged: every handler (ours and uvicorn's) writes control
  characters of a message as escapes (``EscapeControls``; ``%0a`` in a path is logged as
  ``\n``, never as a new line), and the request log escapes its values itself too.
- Money and payment events are logged after they commit (``app.money``): every ledger
  entry and every invoice status change, whoever wrote it (request, worker, CLI).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from app.ledger.models import JournalEntry
from app.payments.models import Invoice
from app.web.middleware import log_safe, redact_path

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
SECRET_QUERY_WORDS = ("token", "key", "secret", "password", "sig", "code")

money_log = logging.getLogger("app.money")
_configured = False


def redact_target(target: str) -> str:
    """A request target (path + query) with secrets replaced by ``[redacted]``."""

    path, sep, query = target.partition("?")
    path = redact_path(path)
    if sep and any(w in query.lower() for w in SECRET_QUERY_WORDS):
        query = "[redacted]"
    return path + (sep + query if sep else "")


class RedactingFilter(logging.Filter):
    """For uvicorn's access log: ``args`` are (client, method, target, http version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            args = (*args[:2], redact_target(args[2]), *args[3:])
        if isinstance(args, tuple):
            args = tuple(log_safe(a) if isinstance(a, str) else a for a in args)
        record.args = args
        return True


class EscapeControls(logging.Filter):
    """On a handler: the record's message with control characters escaped (a traceback,
    formatted apart from the message, keeps its lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is the handler's to report
            return True
        safe = log_safe(message)
        if safe != message:
            record.msg, record.args = safe, None
        return True


def escape_handlers(logger: logging.Logger) -> None:
    for handler in logger.handlers:
        if not any(isinstance(f, EscapeControls) for f in handler.filters):
            handler.addFilter(EscapeControls())


def configure(level: str = "INFO") -> None:
    """Set up logging for this process (idempotent: the first call wins)."""
    global _configured
    if _configured:
        return
    logging.basicConfig(level=level, format=FORMAT)
    logging.getLogger().setLevel(level)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactingFilter) for f in access.filters):
        access.addFilter(RedactingFilter())
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        escape_handlers(logging.getLogger(name))
    install_money_log()
    _configured = True


# --- money events ------------------------------------------------------------------------

_PENDING = "app_money_events"
_installed = False


def _after_flush(session: Any, _ctx: Any) -> None:

    events: dict[tuple[str, int], tuple[str, tuple[Any, ...]]] = session.info.setdefault(
        _PENDING, {}
    )
    for obj in [*session.new, *session.dirty]:
        if isinstance(obj, JournalEntry):
            events[("entry", id(obj))] = (
                "ledger entry %s kind=%s user=%s amount_cents=%s order=%s invoice=%s hold=%s",
                (
                    obj.id,
                    obj.kind,
                    obj.user_id,
                    obj.amount_cents,
                    obj.order_id,
                    obj.invoice_id,
                    obj.hold_id,
                ),
            )
        elif isinstance(obj, Invoice):
            events[("invoice", id(obj))] = (
                "invoice %s user=%s status=%s amount_cents=%s",
                (obj.id, obj.user_id, obj.status, obj.amount_cents),
            )


def _after_commit(session: Any) -> None:
    events = session.info.pop(_PENDING, None)
    for msg, args in (events or {}).values():
        money_log.info(msg, *args)


def _after_rollback(session: Any) -> None:
    session.info.pop(_PENDING, None)


def install_money_log() -> None:
    """Listen on every ORM session (request, worker, CLI) once per process."""
    global _installed
    if _installed:
        return

    event.listen(Session, "after_flush", _after_flush)
    event.listen(Session, "after_commit", _after_commit)
    event.listen(Session, "after_rollback", _after_rollback)
    _installed = True
