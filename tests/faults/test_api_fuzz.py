"""Schemathesis against /openapi.json (bounded): no server errors, and every bad input is
answered with a 4xx whose JSON body says what is wrong."""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from sqlmodel import Session

from app.accounts.security import create_api_token
from app.clock import FixedClock
from app.ledger import service as ledger

pytestmark = pytest.mark.slow
EXAMPLES_PER_OPERATION = 25


def test_api_never_errors_and_explains_bad_input(
    app: FastAPI, make_user, engine, clock: FixedClock
) -> None:  # type: ignore[no-untyped-def]
    user = make_user("customer")
    with Session(engine) as s:
        _row, token = create_api_token(s, user, "fuzz", clock.now())
        ledger.grant_promotion(
            s,
            user_id=user.id,
            amount_cents=5_000_000,
            reason="fuzz",
            now=clock.now(),
            idempotency_key="fuzz",
        )
        s.commit()
    clock.advance(timedelta(seconds=1))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def run(case) -> None:  # type: ignore[no-untyped-def]
            where = f"{case.method} {case.formatted_path}"
            try:
                response = case.call(headers={"Authorization": f"Bearer {token}"})
            except Exception as e:  # noqa: BLE001 - an unhandled error is a server error
                failures.append(f"{where}: raised {e.__class__.__name__}: {str(e)[:200]}")
                return
            if response.status_code >= 500:
                failures.append(f"{where}: {response.status_code} {response.text[:300]}")
                return
            if 400 <= response.status_code < 500:
                try:
                    body = response.json()
                except ValueError:
                    failures.append(f"{where}: {response.status_code} without a JSON body")
                    return
                err = body.get("error") if isinstance(body, dict) else None
                if not isinstance(err, dict) or not (err.get("message") or err.get("errors")):
                    failures.append(
                        f"{where}: {response.status_code} without an explanation: {body!r:.200}"
                    )

        run()
    assert operations >= 5
    assert not failures, "\n".join(sorted(set(failures))[:20])
