"""Strict JSON bodies for the JSON API: what a hostile client sends is refused with a field.

Every ``/api/v1`` router uses :class:`StrictJSONRoute`, whose requests parse their body with
:func:`loads` instead of ``json.loads``. Python's parser is lax where a JSON API should not
be, and some of its failures reached the client as a bare 400 "There was an error parsing
the body" with no field and no code. Here each is a 422 in the API's error shape::

    {"error": {"code": "invalid_input", "message": "...",
               "errors": [{"field": "nodes", "code": "request.number_too_long",
                           "message": "...", "params": {"max": 100}}]}}

- not JSON at all → ``request.not_json`` (field ``body``, with line and column);
- ``NaN``, ``Infinity``, ``-Infinity`` (not JSON) and numbers that overflow a double
  (``1e400``) → ``request.not_finite`` at the field;
- an integer longer than :data:`MAX_INT_DIGITS` digits (Python refuses to convert one over
  4300 digits, which failed the whole parse) → ``request.number_too_long`` at the field;
- a key twice in one object (parsers disagree on which one wins: the last one did here) →
  ``request.duplicate_key`` at the field;
- nesting deeper than :data:`MAX_DEPTH` → ``request.too_deep`` (field ``body``).

The handler never runs, so nothing is written. Huge arrays are bounded by the body limit
(``app.web.middleware``) and by each model's own ``max_length``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response

from app.errors import N_
from app.web.i18n import gettext
from app.web.routing import AppRoute

MAX_DEPTH = 32  # the deepest request any endpoint takes is 4 (sizing: model.architecture.moe)
MAX_INT_DIGITS = 100  # no field takes more than 20; Python itself stops at 4300
MAX_PROBLEMS = 20  # named in one answer (a body of a million NaNs gets the first 20)

MESSAGES: dict[str, str] = {
    "request.not_json": N_("The body is not valid JSON (line {line}, column {column})."),
    "request.too_deep": N_("The JSON nests deeper than {max} levels."),
    "request.number_too_long": N_("This number has more than {max} digits."),
    "request.not_finite": N_(
        "Send a finite number: NaN, Infinity and numbers beyond 1.8e308 are not JSON numbers."
    ),
    "request.duplicate_key": N_("This key appears more than once in the same object."),
}
SUMMARY = N_("Some fields need attention.")


class _Refused:
    """A value the parser refused, left where it stood so that its field can be named."""

    __slots__ = ("code", "params")

    def __init__(self, code: str, params: dict[str, Any] | None = None) -> None:
        self.code = code
        self.params = params or {}


class BodyError(ValueError):
    """The body's problems as ``(field, code, params)``."""

    def __init__(self, problems: list[tuple[str, str, dict[str, Any]]]) -> None:
        super().__init__(problems[0][1])
        self.problems = problems


def loads(raw: bytes | str) -> Any:
    """The JSON value of ``raw``; raises :class:`BodyError` naming each refused field."""
    refused: list[_Refused] = []

    def refuse(code: str, **params: Any) -> _Refused:
        r = _Refused(code, params)
        refused.append(r)
        return r

    def parse_int(s: str) -> int | _Refused:
        if len(s) > MAX_INT_DIGITS and len(s.lstrip("-")) > MAX_INT_DIGITS:
            return refuse("request.number_too_long", max=MAX_INT_DIGITS)
        return int(s)

    def parse_float(s: str) -> float | _Refused:
        f = float(s)
        return f if math.isfinite(f) else refuse("request.not_finite")

    def parse_constant(_s: str) -> _Refused:
        return refuse("request.not_finite")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(items)
        if len(d) != len(items):
            seen: set[str] = set()
            for k, _v in items:
                if k in seen:
                    d[k] = refuse("request.duplicate_key")
                seen.add(k)
        return d

    try:
        value = json.loads(
            raw,
            parse_int=parse_int,
            parse_float=parse_float,
            parse_constant=parse_constant,
            object_pairs_hook=pairs,
        )
    except json.JSONDecodeError as e:
        problem = ("body", "request.not_json", {"line": e.lineno, "column": e.colno})
        raise BodyError([problem]) from None
    except RecursionError:
        raise BodyError([("body", "request.too_deep", {"max": MAX_DEPTH})]) from None
    except UnicodeDecodeError:
        raise BodyError([("body", "request.not_json", {"line": 1, "column": 1})]) from None
    opened = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else len(raw)
    if refused or opened > MAX_DEPTH:  # a short body cannot nest deeper: no walk
        _check(value, bool(refused))
    return value


def _check(value: Any, has_refused: bool) -> None:
    """Walk the parsed value: too deep, or the paths of the refused values."""
    problems: list[tuple[str, str, dict[str, Any]]] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        v, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise BodyError([("body", "request.too_deep", {"max": MAX_DEPTH})])
        if isinstance(v, dict):
            stack.extend((x, (*path, str(k))) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((x, (*path, str(i))) for i, x in reversed(list(enumerate(v))))
        elif has_refused and isinstance(v, _Refused):
            problems.append((".".join(path) or "body", v.code, v.params))
            if len(problems) >= MAX_PROBLEMS:
                break
    if problems:
        raise BodyError(problems)


def invalid_body(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The API's one 422 shape around ``errors`` (each with field, code, message, params),
    for every route: the same envelope as every other API error, with the list beside it."""
    return {"code": "invalid_input", "message": gettext(SUMMARY), "errors": errors}


def error_body(problems: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """The API's error shape for ``problems``, in the request's language."""

    return invalid_body(
        [
            {
                "field": field,
                "code": code,
                "message": gettext(MESSAGES[code]).format(**params),
                "params": params,
            }
            for field, code, params in problems
        ]
    )


class StrictJSONRequest(Request):
    """A request whose ``json()`` is :func:`loads` (parsed once; the value kept on
    ``request.state``, not in Starlette's own cache attribute)."""

    async def json(self) -> Any:
        state = self.state
        if not hasattr(state, "strict_json"):
            try:
                state.strict_json = loads(await self.body())
            except BodyError as e:
                raise HTTPException(status_code=422, detail=error_body(e.problems)) from None
        return state.strict_json


class StrictJSONRoute(AppRoute):
    """An API route whose JSON body is parsed by :func:`loads` (see the module's doc); an
    ``AppRoute``, so its sync handler and the commit take one worker-thread call."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
