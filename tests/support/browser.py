"""Browser-test plumbing shared by every journey: Debian's Chromium through Playwright, and
the test's app served on a free loopback port.

Fixtures (registered from tests/conftest.py): ``live_url`` (the ``app`` fixture served by
uvicorn in a thread) and ``browser`` (a launched Chromium). Constants for tests that start
their own server process: ``CHROMIUM``, ``CHROMIUM_ARGS``, ``requires_chromium``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from tests.support.servers import free_port

CHROMIUM = "/usr/bin/chromium"
# No GPU, no sandbox (root in CI), and none of Chromium's own network chatter.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
requires_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed")


def launch(playwright: Any, **kwargs: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, **kwargs)


@pytest.fixture
def live_url(app: FastAPI) -> Iterator[str]:
    """The test's app (its database, its clock) served over real HTTP for a browser."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()
