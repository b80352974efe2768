"""Write notifications and emails inside the caller's transaction; send the outbox later."""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime
from email.message import EmailMessage

from sqlmodel import Session, col, select

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
) -> Notification:
    """A console notification, and the same text by email when ``email_to`` is given."""
    n = Notification(user_id=user_id, kind=kind, message=message[:1000], link=link, created_at=now)
    session.add(n)
    if email_to:
        enqueue_email(
            session,
            to=email_to,
            subject=email_subject or message[:120],
            body=message,
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
