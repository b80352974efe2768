"""Write notifications and emails inside the caller's transaction; send the outbox later."""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any, NotRequired, TypedDict, Unpack, cast

from sqlalchemy import FromClause, Table, bindparam, or_, update
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app import messages
from app.accounts.models import User
from app.db import transaction
from app.errors import N_
from app.notifications.models import Notification, OutboxEmail

log = logging.getLogger("app.mail")


@dataclass(frozen=True)
class EmailLink:
    """One more page an email links to, after the console link: ``msgid`` (an English
    message id with ``{url}`` and any of ``params``) in the recipient's language, with
    ``path`` made a full URL on the site's public address."""

    msgid: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)


def enqueue_email(
    session: Session,
    *,
    to: str,
    subject: str,
    body: str,
    now: datetime,
    kind: str = "",
    flush: bool = True,
) -> OutboxEmail:
    """Queue one email (sent by the worker after commit). ``flush=False`` leaves the INSERT
    to the session's next flush (one round trip with the caller's other rows)."""
    row = OutboxEmail(
        to_addr=to.strip(), subject=single_line(subject), body=body, kind=kind, created_at=now
    )
    session.add(row)
    if flush:
        session.flush()
    return row


class Notice(TypedDict):
    """What ``notify`` and ``notify_params`` take: ``message`` (and ``email_subject``) are
    English msgids with ``{name}`` ``params``; ``email_to``: also send it by email;
    ``locale``: the recipient's language, when the caller has their account at hand."""

    user_id: int
    kind: str
    message: str
    now: datetime
    link: NotRequired[str]
    email_to: NotRequired[str | None]
    email_subject: NotRequired[str | None]
    params: NotRequired[dict[str, Any] | None]
    locale: NotRequired[str | None]
    links: NotRequired[Sequence[EmailLink]]


def _rows(session: Session, notice: Notice) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The notification's column values, and the email's (None without ``email_to``)."""
    user_id, kind, message, now = (
        notice["user_id"], notice["kind"], notice["message"], notice["now"]
    )  # fmt: skip
    link, params, locale = notice.get("link", ""), notice.get("params"), notice.get("locale")
    user = session.get(User, user_id)
    if locale is None:
        locale = user.locale if user is not None and user.locale else "en"
    locale = locale or "en"
    # Dates of instants in the recipient's own zone (unknown: UTC, labelled).
    zone = user.time_zone if user is not None else ""
    text = messages.render(message, params, locale=locale, zone=zone)
    note = {
        "user_id": user_id,
        "kind": kind,
        "message": text[:1000],
        "msgid": message,
        "params": messages.encode(params),
        "link": link,
        "created_at": now,
    }
    email_to = notice.get("email_to")
    if not email_to:
        return note, None
    email = {
        "to_addr": email_to.strip(),
        "subject": email_subject_line(notice.get("email_subject"), text, params, locale, zone),
        "body": email_body(text, link, locale, notice.get("links", ())),
        "kind": kind,
        "created_at": now,
    }
    return note, email


# Where emails link to: the site's public address (``Settings.base_url``), set once per
# process by ``create_app`` and the worker; empty in code that sends no mail.
BASE_URL = ""
SUBJECT_LIMIT = 100
_WHAT = "\x00"  # stands for the message inside a subject pattern while it is split
_PREFIX_PUNCT = " :：,，-—"


def use_base_url(url: str) -> None:
    global BASE_URL
    BASE_URL = url.rstrip("/")


def _cjk(ch: str) -> bool:
    return ord(ch) >= 0x2E80  # CJK scripts and full-width punctuation


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters with an ellipsis, never inside a word
    or a number: only at a space or next to a CJK character (Chinese has no spaces)."""
    if len(text) <= limit:
        return text
    i = limit - 1
    while i > 0:
        a, b = text[i - 1], text[i]
        if a.isspace() or b.isspace() or _cjk(a) or _cjk(b):
            break
        i -= 1
    head = text[:i] if i > 0 else text[: limit - 1]
    return head.rstrip(" ,;:，；：、(（") + "…"


def _first_sentence(text: str) -> str:
    for stop in ("\n", ". ", "。"):
        head, sep, _rest = text.partition(stop)
        if sep:
            text = head
    return text.rstrip(".。")


def email_subject_line(
    subject: str | None,
    text: str,
    params: dict[str, Any] | None,
    locale: str,
    zone: str | None = None,
) -> str:
    """The one subject pattern: the subject's own words (``Order #{id}: {what}``) with the
    message's first sentence as ``{what}``, the message's own leading "Order #…" dropped
    (no doubled prefix), on one line and at most ``SUBJECT_LIMIT`` characters, cut only
    between words."""
    if not subject:
        return shorten(single_line(_first_sentence(text)), SUBJECT_LIMIT)
    pattern = messages.render(subject, {**(params or {}), "what": _WHAT}, locale=locale, zone=zone)
    head, _sep, tail = pattern.partition(_WHAT)
    what = single_line(text, limit=len(text))
    core = head.rstrip(_PREFIX_PUNCT)
    if _sep and core and what.startswith(core):
        what = what[len(core) :].lstrip(_PREFIX_PUNCT)
    line = head + _first_sentence(what) + tail if _sep else pattern
    return shorten(single_line(line, limit=len(line)), SUBJECT_LIMIT)


def absolute_url(path: str) -> str:
    return BASE_URL + path if path.startswith("/") else path


def email_body(text: str, link: str, locale: str, links: Sequence[EmailLink] = ()) -> str:
    """The message (every fact it states), the page that acts on it and any document it
    concerns (``links``: a receipt, a credit note), each as a full URL."""
    more = []
    if link:
        more.append(
            messages.render(
                N_("Open it in your console: {url}"), {"url": absolute_url(link)}, locale=locale
            )
        )
    for extra in links:
        more.append(
            messages.render(
                extra.msgid, {**extra.params, "url": absolute_url(extra.path)}, locale=locale
            )
        )
    if not more:
        return text
    return text + "\n\n" + "\n".join(more)


def notify(session: Session, *, flush: bool = True, **notice: Unpack[Notice]) -> Notification:
    """A console notification, and the same text by email when ``email_to`` is given.

    ``message`` (and ``email_subject``) are English msgids with ``{name}`` parameters: the
    notification is stored as that code and shown in the reader's language; the email is
    written in the recipient's language (their account's language). ``links``: documents
    the email links to after the console link (a receipt, a credit note)."""
    note, email = _rows(session, notice)
    n = Notification(**note)
    session.add(n)
    if email is not None:
        session.add(OutboxEmail(**email))
    if flush:  # flush=False: the caller's next flush writes both rows
        session.flush()
    return n


_NOTIFICATIONS = cast(Table, Notification.__table__)  # type: ignore[attr-defined]
_OUTBOX = cast(Table, OutboxEmail.__table__)  # type: ignore[attr-defined]
_NOTE_COLUMNS = ("user_id", "kind", "message", "msgid", "params", "link", "created_at")
_EMAIL_COLUMNS = (
    "to_addr", "subject", "body", "kind", "created_at", "attempts", "last_error", "sent_at"
)  # fmt: skip


def notify_params(session: Session, **notice: Unpack[Notice]) -> dict[str, Any]:
    """``notify``'s rows as the parameters of ``notify_statements`` (``n_<column>`` for the
    notification, ``e_<column>`` for the email when ``email_to`` is given)."""
    note, email = _rows(session, notice)
    out = {f"n_{k}": v for k, v in note.items()}
    if email is not None:
        email = {**email, "attempts": 0, "last_error": "", "sent_at": None}
        out.update({f"e_{k}": v for k, v in email.items()})
    return out


def _insert(table: Table, columns: tuple[str, ...], prefix: str, gate: FromClause | None) -> Any:
    values = [bindparam(f"{prefix}{c}", type_=table.c[c].type) for c in columns]
    if gate is None:
        return sa_insert(table).values(dict(zip(columns, values, strict=True)))
    return sa_insert(table).from_select(list(columns), sa_select(*values).select_from(gate))


def notify_statements(gate: FromClause | None, *, email: bool) -> list[Any]:
    """``notify`` as plain INSERT statements over ``notify_params``: the notification and,
    with ``email``, the outbox email. ``gate``: a one-row selectable of the caller's
    statement (e.g. the ledger's ``HOLD_IN_ONE.written``): each row is inserted only when
    ``gate`` has its row, so a composer can make them CTEs of one statement; None: plain
    INSERT … VALUES."""
    out = [_insert(_NOTIFICATIONS, _NOTE_COLUMNS, "n_", gate)]
    if email:
        out.append(_insert(_OUTBOX, _EMAIL_COLUMNS, "e_", gate))
    return out


def unread_for(session: Session, user_id: int, limit: int = 20) -> list[Notification]:
    stmt = (
        select(Notification)
        .where(Notification.user_id == user_id)
        .order_by(col(Notification.created_at).desc(), col(Notification.id).desc())
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def mark_read(engine: Engine, user_id: int, ids: list[int], now: datetime) -> None:
    """Mark console notifications seen, in a short write transaction of its own (called
    from a GET, whose request session reads without taking SQLite's write lock)."""
    if not ids:
        return
    with transaction(engine) as w:
        w.exec(
            update(Notification)
            .where(
                col(Notification.id).in_(ids),
                col(Notification.user_id) == user_id,
                col(Notification.read_at).is_(None),
            )
            .values(read_at=now)
        )


MAX_ATTEMPTS = 10
CLAIM = timedelta(minutes=5)  # longer than a round of sends (50 × 10 s SMTP timeout)


def single_line(text: str, limit: int = 200) -> str:
    """Subjects (and any header) are one line by construction: every run of whitespace,
    CR and LF included, becomes one space."""
    return " ".join(text.split())[:limit]


def build_message(row: OutboxEmail, sender: str) -> EmailMessage:
    """Raises ``ValueError`` (or ``email.errors.*``) for a message that can never be sent."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = row.to_addr
    msg["Subject"] = single_line(row.subject)
    msg.set_content(row.body)
    return msg


def claim_outbox(engine: Engine, now: datetime, limit: int = 50) -> list[OutboxEmail]:
    """Claim up to ``limit`` unsent rows for ``CLAIM`` in one short transaction (rows
    locked with SKIP LOCKED on PostgreSQL while claiming, so two workers never claim the
    same row), and commit: no lock is held while mail is sent."""
    with transaction(engine) as s:
        stmt = (
            select(OutboxEmail)
            .where(
                col(OutboxEmail.sent_at).is_(None),
                col(OutboxEmail.failed_at).is_(None),
                OutboxEmail.attempts < MAX_ATTEMPTS,
                or_(
                    col(OutboxEmail.claimed_until).is_(None),
                    col(OutboxEmail.claimed_until) < now,
                ),
            )
            .order_by(col(OutboxEmail.id))
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = list(s.exec(stmt).all())
        for r in rows:
            r.claimed_until = now + CLAIM
            s.add(r)
        return rows


def _mark(
    engine: Engine, row_id: int, now: datetime, *, sent: bool, error: str = "", final: bool = False
) -> None:
    """One row's outcome in its own short transaction."""
    with transaction(engine) as s:
        r = s.get(OutboxEmail, row_id)
        if r is None:
            return
        r.claimed_until = None
        if sent:
            r.sent_at = now
            r.last_error = ""
        else:
            r.attempts += 1
            r.last_error = error[:500]
            if final or r.attempts >= MAX_ATTEMPTS:
                r.failed_at = now
        s.add(r)


def send_outbox(
    engine: Engine, *, host: str, port: int, sender: str, now: datetime, limit: int = 50
) -> int:
    """Send unsent emails over SMTP, outside any transaction.

    Claim rows (short transaction, committed), send each, and mark each sent — or failed
    with its error — in its own short transaction. A message that can never be sent
    (malformed address or header) is marked failed at once and never retried; a refused
    or unreachable server is retried next round, up to ``MAX_ATTEMPTS``. A crash between
    send and mark resends that one message after its claim lapses; none is lost.
    """
    rows = claim_outbox(engine, now, limit)
    if not rows:
        return 0
    messages: list[tuple[OutboxEmail, EmailMessage]] = []
    for r in rows:
        assert r.id is not None
        try:
            messages.append((r, build_message(r, sender)))
        except Exception as e:  # noqa: BLE001 - a malformed message must not stop the rest
            log.warning("outbox email %s is malformed and will not be sent: %s", r.id, e)
            _mark(engine, r.id, now, sent=False, error=f"malformed: {e}", final=True)
    if not messages:
        return 0
    try:
        smtp = smtplib.SMTP(host, port, timeout=10)
    except OSError as e:
        log.warning("SMTP %s:%s unreachable: %s", host, port, e)
        for r, _msg in messages:
            assert r.id is not None
            _mark(engine, r.id, now, sent=False, error=f"connect: {e}")
        return 0
    sent = 0
    with smtp:
        for r, msg in messages:
            assert r.id is not None
            try:
                smtp.send_message(msg)
            except (smtplib.SMTPException, OSError, ValueError) as e:
                permanent = isinstance(e, smtplib.SMTPRecipientsRefused | ValueError)
                log.warning("outbox email %s not sent: %s", r.id, e)
                _mark(engine, r.id, now, sent=False, error=str(e), final=permanent)
            else:
                _mark(engine, r.id, now, sent=True)
                sent += 1
    return sent
