"""A test-only app: the real app plus ``POST /api/test/debit`` (a hold through the ledger),
so several uvicorn processes can race real debits over HTTP against one database.

    uvicorn --factory tests.ledger.debit_app:make   (settings from APP_* environment)
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from fastapi import Body, FastAPI

from app.accounts.deps import CurrentUser
from app.ledger import service as ledger
from app.main import create_app
from app.web.deps import NowDep, SessionDep


class InFlightLimit:
    """Queue requests beyond ``limit`` at the ASGI edge.

    Without it, more concurrent requests than pooled connections deadlock the app: sync
    dependencies hold a pooled session while their endpoint waits for a worker thread, and
    the worker threads all wait for a pooled connection (until the pool times out).
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.sem = app, asyncio.Semaphore(limit)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        async with self.sem:
            await self.app(scope, receive, send)


def make() -> FastAPI:
    app = create_app()
    app.add_middleware(InFlightLimit, limit=int(os.environ.get("TEST_IN_FLIGHT", "12")))

    @app.post("/api/test/debit", status_code=201)
    def debit(
        session: SessionDep, user: CurrentUser, now: NowDep, body: Any = Body(...)
    ) -> dict[str, Any]:  # noqa: B008
        hold = ledger.place_hold(
            session,
            user_id=user.id,  # type: ignore[arg-type]
            amount_cents=int(body["amount_cents"]),
            idempotency_key=str(body["key"]),
            now=now,
            reason="concurrency test",
        )
        return {"hold_id": hold.id}

    return app
