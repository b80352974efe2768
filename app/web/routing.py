"""``AppRoute``: a synchronous handler and its session's commit in one worker-thread call.

FastAPI runs a ``def`` handler in the thread pool (one call) and the end of the session
dependency (commit or rollback: database I/O) in another. Each call is a round trip
between the event loop and a worker thread (two cross-thread wake-ups and a GIL
hand-off), as much CPU as the rest of a small request on a 2-core VM. Two public
mechanisms keep most of that:

- dependencies that do no I/O (the clock, the settings, the CSRF check) are ``async
  def``: FastAPI calls them on the loop, no thread at all (``app/web/deps.py``);
- every router is built with ``APIRouter(route_class=AppRoute)``. ``AppRoute`` gives
  FastAPI, for a ``def`` handler, an ``async def`` endpoint (``functools.wraps``: the
  same signature, so the same parameters, dependencies and OpenAPI) that makes ONE
  worker-thread call: the handler, then (when it took the request's session) the commit,
  rolled back on any exception, in that thread. ``get_session`` then only closes the
  session. The answer is validated and serialised on the loop (no I/O), not in a second
  thread call as FastAPI does for a ``def`` handler with a response model.

The request still owns the transaction and commits before a byte of the answer is sent
(the answer is serialised after the commit, on the loop; a handler that returns a
``Response`` has built it already). A worker-thread call is never abandoned when the
client goes away (anyio waits for it), so the commit is as shielded as in
``get_session``. Dependencies that read the database (the user) keep their own thread
call, as FastAPI makes it; ``dependency_overrides`` work as usual (an overridden session
dependency is not committed here). Handlers that touch the database stay ``def``: the
architecture test reads the declared handler (``__wrapped__``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from app.web.deps import request_session, settle_session


def _run_and_settle(handler: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """In the worker thread: the handler, then the end of the request's transaction."""
    session = request_session()
    if session is None:  # the handler's tree takes no session (or it is overridden)
        return handler(**kwargs)
    try:
        result = handler(**kwargs)
    except BaseException:
        settle_session(session, commit=False)
        raise
    settle_session(session, commit=True)
    return result


def one_thread_call(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` (a ``def``) as an ``async def`` endpoint that runs it and the commit in
    one worker-thread call."""

    @functools.wraps(handler)
    async def endpoint(**kwargs: Any) -> Any:
        return await run_in_threadpool(_run_and_settle, handler, kwargs)

    return endpoint


def _is_plain_def(call: Callable[..., Any]) -> bool:
    return inspect.isfunction(call) and not (
        inspect.iscoroutinefunction(call)
        or inspect.isgeneratorfunction(call)
        or inspect.isasyncgenfunction(call)
    )


class AppRoute(APIRoute):
    """An ``APIRoute`` whose ``def`` handler runs with its commit in one thread call."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if _is_plain_def(endpoint):
            endpoint = one_thread_call(endpoint)
        super().__init__(path, endpoint, **kwargs)
