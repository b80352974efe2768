"""What every ops action route of the orders domain takes from its request, as one value:
``OpsCall`` (ops' user, the request, its session and the time)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlmodel import Session

from app.accounts.audit import client_ip
from app.accounts.deps import OpsUser
from app.accounts.models import User
from app.web.deps import NowDep, SessionDep


@dataclass(frozen=True)
class DeskCall:
    """An ops action's request: who acts (ops only: others get 403), over which session, when."""

    request: Request
    session: Session
    user: User
    now: datetime

    def run(self, action: Callable[..., object], **args: Any) -> None:
        """``action`` done by this request's ops user: who acts, over which session, when and
        from where are the request's; ``args`` are the rest ``action`` takes."""
        ip = client_ip(self.request)
        action(self.session, actor=self.user, now=self.now, ip=ip, **args)


def _desk_call(request: Request, user: OpsUser, session: SessionDep, now: NowDep) -> DeskCall:
    return DeskCall(request, session, user, now)


OpsCall = Annotated[DeskCall, Depends(_desk_call)]
