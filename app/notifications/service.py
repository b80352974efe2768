"""Write notifications and emails inside the caller's transaction; send the outbox later."""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from sqlmodel import Session, col, select

from app.notifications import messages
from app.notifications.models import Notification, OutboxEmail

log = logging.getLogger("app.mail")


def enqueue_email(
    session: Session, *, to: str, subject: str, body: str, now: datetime, kind: str = ""
) -> OutboxEmail:
    row = OutboxEmail(to_addr=to, subject=subject[:200], body=body, kind=kind, created_at=now)
    session.add(row)
    session.flush()
    return row


def notify(
    session: Session,
    *,
    user_id: int,
    kind: str,
    message: str,
    now: datetime,
    link: str = "",
    email_to: str | None = None,
    email_subject: str | None = None,
    params: dict[str, Any] | None = None,
) -> Notification:
    """A console notification, and the same text by email when ``email_to`` is given.

    ``message`` (and ``email_subject``) are English msgids with ``{name}`` parameters: the
    notification is stored as that code and shown in the reader's language; the email is
    written in the recipient's language (their account's language)."""
    from app.accounts.models import User

    user = session.get(User, user_id)
    locale = user.locale if user is not None and user.locale else "en"
    text = messages.render(message, params, locale=locale)
    n = Notification(
        user_id=user_id,
        kind=kind,
        message=text[:1000],
        msgid=message,
        params=messages.encode(params),
        link=link,
        created_at=now,
    )
    session.add(n)
    if email_to:
        subject = (
            messages.render(email_subject, {**(params or {}), "what": text[:80]}, locale=locale)
            if email_subject
            else text
        )
        enqueue_email(
            session,
            to=email_to,
            subject=subject[:120],
            body=text,
            now=now,
            kind=kind,
        )
    session.flush()
    return n


def unread_for(session: Session, user_id: int, limit: int = 20) -> list[Notification]:
    stmt = (
        select(Notification)
        .where(Notification.user_id == user_id)
        .order_by(col(Notification.created_at).desc(), col(Notification.id).desc())
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def send_outbox(
    session: Session, *, host: str, port: int, sender: str, now: datetime, limit: int = 50
) -> int:
    """Send unsent emails over SMTP; each row is marked sent in the caller's transaction.

    Rows are locked (PostgreSQL) so two workers never send the same email twice.
    """
    stmt = (
        select(OutboxEmail)
        .where(col(OutboxEmail.sent_at).is_(None), OutboxEmail.attempts < 10)
        .order_by(col(OutboxEmail.id))
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = list(session.exec(stmt).all())
    if not rows:
        return 0
    sent = 0
    try:
        smtp = smtplib.SMTP(host, port, timeout=10)
    except OSError as e:
        for r in rows:
            r.attempts += 1
            r.last_error = f"connect: {e}"[:500]
            session.add(r)
        log.warning("SMTP %s:%s unreachable: %s", host, port, e)
        return 0
    with smtp:
        for r in rows:
            msg = EmailMessage()
            msg["From"] = sender
            msg["To"] = r.to_addr
            msg["Subject"] = r.subject
            msg.set_content(r.body)
            try:
                smtp.send_message(msg)
            except smtplib.SMTPException as e:
                r.attempts += 1
                r.last_error = str(e)[:500]
            else:
                r.sent_at = now
                sent += 1
            session.add(r)
    return sent
