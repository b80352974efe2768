"""Nobody can forge a line in the app's logs: a CR, LF or NUL from a request (the path, a
header, a form value) is written as an escape, in the request log, the access log and
every handler ``app.logs.configure`` sets up."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app import logs

FORGED = "x%0a2026-12-01 22:00:00,000 WARNING app.money FORGED ledger credit user=1"
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO app\.request ")


@pytest.fixture
def request_log() -> Iterator[io.StringIO]:
    """The request log as a plain handler writes it (no filter of ours on the handler: the
    middleware must escape its values itself)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(logs.FORMAT))
    logger = logging.getLogger("app.request")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_a_forged_line_in_the_path_stays_on_its_own_line(
    client: TestClient, request_log: io.StringIO
) -> None:
    for path in (f"/nodes/{FORGED}", "/nodes/a%00b", "/nodes/c%0d%0ad", "/nodes/e%e2%80%a8f"):
        client.get(path)
    text = request_log.getvalue()
    assert "\x00" not in text and "\r" not in text and "\u2028" not in text
    lines = text.splitlines()
    assert len(lines) == 4 and all(LINE.match(line) for line in lines), lines
    assert "x\\n2026-12-01 22:00:00,000 WARNING app.money FORGED" in lines[0]
    assert "a\\x00b" in lines[1] and "c\\r\\nd" in lines[2]


def test_every_configured_handler_escapes_messages_from_any_logger() -> None:
    out = io.StringIO()
    logger = logging.getLogger("tests.log_forgery")
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logs.escape_handlers(logger)
        logger.warning("webhook refused from %s", "1.2.3.4\nINFO app.money FORGED\x00")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("with a traceback")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    text = out.getvalue()
    assert text.splitlines()[0] == "webhook refused from 1.2.3.4\\nINFO app.money FORGED\\x00"
    assert "Traceback (most recent call last):\n" in text  # tracebacks keep their lines


def test_the_access_log_escapes_the_target() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4:5", "GET", "/nodes/x\nFORGED\x00", "1.1", 404),
        None,
    )
    assert logs.RedactingFilter().filter(record)
    assert record.getMessage() == '1.2.3.4:5 - "GET /nodes/x\\nFORGED\\x00 HTTP/1.1" 404'
