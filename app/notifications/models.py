"""The mail outbox and in-console notifications."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime


class OutboxEmail(SQLModel, table=True):
    """An email written in the same transaction as the change it reports; sent later."""

    __tablename__ = "outbox_emails"
    id: int | None = Field(default=None, primary_key=True)
    to_addr: str = Field(max_length=254, index=True)
    subject: str = Field(max_length=200)
    body: str = Field(sa_column=Column(Text, nullable=False))
    kind: str = Field(default="", max_length=40)
    created_at: datetime = Field(sa_type=UTCDateTime)
    sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    attempts: int = 0
    last_error: str = Field(default="", max_length=500)
    # A worker's claim on the row until this instant (sent outside any transaction; a
    # crash between send and mark resends it once the claim lapses, never loses it).
    claimed_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # Set when the message can never be sent (malformed) or ran out of attempts.
    failed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class Notification(SQLModel, table=True):
    """A message shown in the customer's console."""

    __tablename__ = "notifications"
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    kind: str = Field(max_length=40)
    message: str = Field(max_length=1000)  # in the recipient's language when written
    # The message as a code (app/messages.py), shown in the reader's language.
    msgid: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    params: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    link: str = Field(default="", max_length=300)
    created_at: datetime = Field(sa_type=UTCDateTime)
    read_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
