"""One worker-thread call per request for synchronous handlers.

FastAPI runs a ``def`` handler in the thread pool, and it also runs *each* ``def``
dependency in a thread pool call of its own (``CurrentUser``, ``NowDep``, ...), and the
session's end (commit or rollback) is one more. Each call is a round trip between the
event loop and a worker thread: two cross-thread wake-ups and a GIL hand-off, ~0.5 ms
of CPU on this 2-core VM, as much as the rest of a small JSON request. ``OneHopRoute``
makes it one call per request:

- a synchronous dependency of a synchronous handler is *deferred*: on the event loop
  FastAPI still solves the dependency tree (parameters, validation, cache), but the
  dependency's function is called in the handler's worker thread, just before the
  handler, in the order FastAPI would have called it (each at most once per request,
  as FastAPI's dependency cache does);
- in that same thread, after the handler, the answer is built as FastAPI builds it
  (response model validated and serialised, or ``jsonable_encoder``), and only then the
  request's session commits (or rolls back on any exception): the request still owns
  the transaction, it still commits before a byte of the answer is sent, and a worker
  thread call is never abandoned on cancellation (anyio shields it), so the commit is
  as shielded as before. ``get_session`` then only closes the session (no I/O).

What stays as it was: the declared handlers and dependencies (the architecture test and
OpenAPI read ``route.dependant``, which is untouched); a route whose tree runs anything
else after a deferred dependency (an async dependency reading the form, a generator
dependency) keeps FastAPI's own handler, as do async handlers, streaming ones and any
request made while ``app.dependency_overrides`` is set. A request whose parameters fail
validation still runs its dependencies first (in one thread call), so an unauthenticated
request with a bad body is still a 401, not a 422.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any

from fastapi import Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.routing import (
    APIRoute,
    _effective_route_context_var,  # the route as included (its app/router dependencies)
    get_request_handler,
)
from fastapi.utils import is_body_allowed_for_status_code
from starlette.concurrency import run_in_threadpool

from app.web.deps import get_session, settle_session

# The deferred dependency calls of the request being solved (set by the route's handler,
# read by the placeholders on the loop and by the handler's thread).
_PENDING: ContextVar[list[_Deferred] | None] = ContextVar("onehop_pending", default=None)

# Names under which the thread call receives what it needs when the handler does not
# itself declare a Request/Response parameter.
_REQUEST = "_onehop_request"
_RESPONSE = "_onehop_response"

# Async dependencies that may run on the loop *after* a deferred one without changing
# anything observable: opening the session does no I/O.
_LOOP_SAFE: frozenset[Callable[..., Any]] = frozenset({get_session})


class _Deferred:
    """A synchronous dependency's call, made later in the handler's thread."""

    __slots__ = ("call", "done", "kwargs", "value")

    def __init__(self, call: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.call = call
        self.kwargs = kwargs
        self.done = False
        self.value: Any = None

    def resolve(self) -> Any:
        if not self.done:
            kwargs = {k: _resolved(v) for k, v in self.kwargs.items()}
            self.value = self.call(**kwargs)
            self.done = True
        return self.value


def _resolved(v: Any) -> Any:
    return v.resolve() if isinstance(v, _Deferred) else v


def _resolve_pending(pending: list[_Deferred]) -> None:
    for d in list(pending):  # in the order FastAPI reached them
        d.resolve()


_PLACEHOLDERS: dict[Callable[..., Any], Callable[..., Any]] = {}


def _placeholder(call: Callable[..., Any]) -> Callable[..., Any]:
    """The async stand-in FastAPI awaits on the loop in place of ``call``: one per
    function, so FastAPI's dependency cache keys stay one per dependency."""
    found = _PLACEHOLDERS.get(call)
    if found is not None:
        return found

    async def deferred(**kwargs: Any) -> _Deferred:
        pending = _PENDING.get()
        assert pending is not None, "a deferred dependency outside OneHopRoute's handler"
        d = _Deferred(call, kwargs)
        pending.append(d)
        return d

    deferred.__qualname__ = f"deferred({getattr(call, '__qualname__', repr(call))})"
    _PLACEHOLDERS[call] = deferred
    return deferred


def _is_plain_sync(call: Any) -> bool:
    from fastapi.dependencies.models import (
        _is_async_gen_callable,
        _is_coroutine_callable,
        _is_gen_callable,
    )

    return not (
        _is_coroutine_callable(call) or _is_gen_callable(call) or _is_async_gen_callable(call)
    )


@dataclasses.dataclass
class _Walk:
    deferred_any: bool = False
    ok: bool = True
    seen: set[Any] = dataclasses.field(default_factory=set)
    takes_session: bool = False


def _plan_tree(dep: Dependant, walk: _Walk) -> Dependant:
    """A copy of ``dep``'s sub-tree with its synchronous dependencies deferred, walked in
    FastAPI's solving order (children first, then the dependency, cached ones once)."""
    children = [_plan_tree(d, walk) for d in dep.dependencies]
    call = dep.call
    if call is get_session:
        walk.takes_session = True
    cached = dep.use_cache and call in walk.seen
    if dep.use_cache:
        walk.seen.add(call)
    new_call = call
    if call is not None and _is_plain_sync(call):
        new_call = _placeholder(call)  # every occurrence: one cache key, as before
        walk.deferred_any = True
    elif call is not None and not cached and walk.deferred_any and call not in _LOOP_SAFE:
        walk.ok = False  # something with effects would now run before a deferred call
    return dataclasses.replace(dep, dependencies=children, call=new_call)


@dataclasses.dataclass(frozen=True)
class _Answer:
    """How FastAPI turns a handler's return value into a response (its non-streaming
    branch), done in the handler's thread so the commit comes after it, as before."""

    status_code: int | None
    response_class: Any
    field: Any
    dump_json: bool
    serialize_kwargs: dict[str, Any]

    def build(self, raw: Any, sub: Response) -> Response:
        if isinstance(raw, Response):
            return raw
        status = self.status_code if self.status_code else sub.status_code
        if sub.status_code:
            status = sub.status_code
        args: dict[str, Any] = {} if status is None else {"status_code": status}
        if self.field is not None:
            value, errors = self.field.validate(raw, {}, loc=("response",))
            if errors:
                raise ResponseValidationError(errors=errors, body=raw)
            serializer = self.field.serialize_json if self.dump_json else self.field.serialize
            content = serializer(value, **self.serialize_kwargs)
        else:
            content = jsonable_encoder(raw)
        if self.dump_json:
            response = Response(content=content, media_type="application/json", **args)
        else:
            response = self.response_class(content, **args)
        if not is_body_allowed_for_status_code(response.status_code):
            response.body = b""
        response.headers.raw.extend(sub.headers.raw)
        return response


def _thread_call(
    endpoint: Callable[..., Any],
    answer: _Answer,
    request_name: str,
    response_name: str,
    drop: tuple[str, ...],
    takes_session: bool,
) -> Callable[..., Any]:
    @functools.wraps(endpoint)
    def run(**values: Any) -> Response:
        request: Request = values[request_name]
        sub: Response = values[response_name]
        for name in drop:
            del values[name]
        session = getattr(request.state, "db", None) if takes_session else None
        try:
            pending = _PENDING.get()
            if pending:
                _resolve_pending(pending)
            raw = endpoint(**{k: _resolved(v) for k, v in values.items()})
            response = answer.build(raw, sub)
        except BaseException:
            if session is not None:
                settle_session(session, commit=False)
            raise
        if session is not None:
            settle_session(session, commit=True)
        return response

    return run


class OneHopRoute(APIRoute):
    """``APIRoute`` whose synchronous handlers take one worker-thread call per request
    (see the module docstring). Behaviour is FastAPI's; only the thread hops differ."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        stock = super().get_route_handler()
        route: Any = self
        effective = _effective_route_context_var.get()
        if effective is not None and effective.original_route is self:
            route = effective
        fast = _fast_handler(route, self)
        if fast is None:
            return stock
        overrides_provider = route.dependency_overrides_provider

        async def handler(request: Request) -> Response:
            if overrides_provider is not None and getattr(
                overrides_provider, "dependency_overrides", None
            ):
                return await stock(request)  # overrides: FastAPI's own way, unchanged
            pending: list[_Deferred] = []
            token = _PENDING.set(pending)
            try:
                return await fast(request)
            except RequestValidationError:
                # FastAPI would have run the dependencies (and raised their error, a 401)
                # before it looked at the parameters' errors: run the ones not run yet.
                if any(not d.done for d in pending):
                    await run_in_threadpool(_resolve_pending, pending)
                raise
            finally:
                _PENDING.reset(token)

        return handler


def _fast_handler(
    route: Any, original: APIRoute
) -> Callable[[Request], Coroutine[Any, Any, Response]] | None:
    dependant: Dependant = route.dependant
    endpoint = dependant.call
    if (
        endpoint is None
        or not _is_plain_sync(endpoint)
        or getattr(route, "is_sse_stream", False)
        or getattr(route, "is_json_stream", False)
        or route.stream_item_field is not None
    ):
        return None
    walk = _Walk()
    planned = _plan_tree(dependant, walk)
    if not walk.ok or not (walk.deferred_any or walk.takes_session):
        return None  # FastAPI's handler makes no more thread calls than this would
    drop: list[str] = []
    request_name = dependant.request_param_name
    if request_name is None:
        request_name = _REQUEST
        drop.append(_REQUEST)
    response_name = dependant.response_param_name
    if response_name is None:
        response_name = _RESPONSE
        drop.append(_RESPONSE)
    response_class = route.response_class
    answer = _Answer(
        status_code=route.status_code,
        response_class=response_class.value
        if isinstance(response_class, DefaultPlaceholder)
        else response_class,
        field=route.response_field,
        dump_json=route.response_field is not None
        and isinstance(response_class, DefaultPlaceholder),
        serialize_kwargs={
            "include": route.response_model_include,
            "exclude": route.response_model_exclude,
            "by_alias": route.response_model_by_alias,
            "exclude_unset": route.response_model_exclude_unset,
            "exclude_defaults": route.response_model_exclude_defaults,
            "exclude_none": route.response_model_exclude_none,
        },
    )
    planned = dataclasses.replace(
        planned,
        call=_thread_call(
            endpoint, answer, request_name, response_name, tuple(drop), walk.takes_session
        ),
        request_param_name=request_name,
        response_param_name=response_name,
    )
    return get_request_handler(
        dependant=planned,
        body_field=route.body_field,
        status_code=route.status_code,
        response_class=route.response_class,
        response_field=None,  # built in the thread (``_Answer``): never a Response twice
        dependency_overrides_provider=route.dependency_overrides_provider,
        embed_body_fields=route._embed_body_fields,  # noqa: SLF001 - FastAPI's own field
        strict_content_type=route.strict_content_type,
        form_limits=original.form_limits,
    )


def adopt(routes: list[Any]) -> None:
    """Make every ``APIRoute`` among ``routes`` (and in routers included there) a
    ``OneHopRoute``: the routers are built at import by each domain with FastAPI's
    ``APIRouter``; the class only changes how the handler is built, which FastAPI does
    lazily, per app, when a router is included."""
    for route in routes:
        if type(route) is APIRoute:
            route.__class__ = OneHopRoute
        original = getattr(route, "original_router", None)
        if original is not None:
            adopt(original.routes)
