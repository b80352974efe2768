"""Launch configurations for one option of a sizing answer (pure: no framework imported).

``export_launch(request, option, framework)`` sizes the request (the engine's cached answer),
takes option ``option`` (the answer's ``options[option]``) and writes the files that run it
under ``framework``: torchtitan, megatron, deepspeed or accelerate. A layout the framework
cannot run as sized raises :class:`LaunchError` with a code, the reason and the frameworks
that can; so does an option that does not exist or has no layout. See docs/launch-configs.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.sizing.engine import size_result
from app.sizing.launch import accelerate, deepspeed, megatron, torchtitan
from app.sizing.launch.errors import N_, LaunchError
from app.sizing.launch.files import LaunchFile
from app.sizing.launch.plan import Plan, invariants, plan_of
from app.sizing.request import validate

__all__ = [
    "DEFAULT_FOR",
    "FRAMEWORKS",
    "Bundle",
    "LaunchError",
    "LaunchFile",
    "Plan",
    "export_launch",
    "export_plan",
    "invariants",
    "launch_json",
    "parse_body",
    "plan_of",
]

Renderer = Callable[[Plan, "list[str] | None"], list[LaunchFile]]
FRAMEWORKS: dict[str, tuple[str, str, Renderer]] = {
    "torchtitan": (torchtitan.NAME, torchtitan.VERSION, torchtitan.render),
    "megatron": (megatron.NAME, megatron.VERSION, megatron.render),
    "deepspeed": (deepspeed.NAME, deepspeed.VERSION, deepspeed.render),
    "accelerate": (accelerate.NAME, accelerate.VERSION, accelerate.render),
}
# the request's ``framework`` (whose memory layout the engine assumed) -> the launcher
DEFAULT_FOR = {
    "fsdp2": "torchtitan",
    "megatron": "megatron",
    "deepspeed": "deepspeed",
    "hf": "accelerate",
}


@dataclass(frozen=True)
class Bundle:
    framework: str
    plan: Plan
    files: list[LaunchFile]

    def as_dict(self) -> dict[str, Any]:
        name, version, _render = FRAMEWORKS[self.framework]
        p = self.plan
        return {
            "framework": self.framework,
            "framework_name": name,
            "framework_version": version,
            "answer_id": p.answer_id,
            "option": p.option_index,
            "sku": p.sku,
            "nodes": p.nodes,
            "gpus": p.world,
            "predicted_memory_per_gpu_bytes": p.memory_bytes,
            "predicted_memory_range_bytes": list(p.memory_range_bytes),
            "predicted_tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
            "files": [f.as_dict() for f in self.files],
        }


def _unknown(framework: str) -> LaunchError:
    return LaunchError(
        "unknown_framework",
        N_("Unknown framework %(framework)s: choose one of %(choices)s."),
        # the name as sent, cut short: a 100 KB name came back twice
        {
            "framework": framework[:40] + ("…" if len(framework) > 40 else ""),
            "choices": ", ".join(FRAMEWORKS),
        },
        tuple(FRAMEWORKS),
    )


def export_plan(plan: Plan, framework: str, hosts: list[str] | None = None) -> Bundle:
    """The files for ``plan`` under ``framework`` (``hosts``: the nodes' names, in order)."""
    if framework not in FRAMEWORKS:
        raise _unknown(framework)
    broken = invariants(plan)
    if broken:  # a plan the engine should never give: refused, never written half-right
        raise LaunchError(
            "layout_inconsistent",
            N_("This layout breaks a rule every launch configuration keeps: %(rules)s."),
            {"rules": "; ".join(broken)},
        )
    try:
        files = FRAMEWORKS[framework][2](plan, hosts)
    except LaunchError as e:
        # who can run it is asked of each writer, not listed by hand: a writer's own list
        # named frameworks that then refused this plan for a reason of their own
        e.frameworks = tuple(k for k in FRAMEWORKS if k != framework and _writes(k, plan))
        raise
    return Bundle(framework, plan, files)


def _writes(framework: str, plan: Plan) -> bool:
    """Whether ``framework``'s writer writes ``plan`` (no refusal)."""
    try:
        FRAMEWORKS[framework][2](plan, None)
    except LaunchError:
        return False
    return True


def export_launch(
    request: Any,
    option: int,
    framework: str | None = None,
    *,
    prices: dict[str, int] | None = None,
    hosts: list[str] | None = None,
) -> Bundle:
    """Size ``request`` and write option ``option``'s launch files for ``framework``
    (default: the launcher of the request's own ``framework``). Raises SizingError for a bad
    request, LaunchError for a bad option or framework or a layout it cannot run."""
    if framework is not None and framework not in FRAMEWORKS:
        raise _unknown(framework)
    req = validate(request)
    result = size_result(request, prices=prices)
    plan = plan_of(req, result, option)
    return export_plan(plan, framework or DEFAULT_FOR[req.framework], hosts)


MAX_OPTION = 1 << 16


def parse_body(body: Any) -> tuple[dict[str, Any], int, str | None]:
    """``POST /api/v1/sizing/launch``'s body -> (sizing request, option, framework or None).

    The one validation of the launch body (the API's; the CLI takes the same three from its
    flags): an object with ``request`` (a sizing request object), ``option`` (an integer
    >= 0) and optionally ``framework``; nothing else. Raises LaunchError naming the field."""
    if not isinstance(body, dict):
        raise LaunchError("body_not_object", N_("The body must be a JSON object."), field="body")
    extra = sorted(set(body) - {"request", "option", "framework"})
    if extra:
        raise LaunchError(
            "unknown_field",
            N_("Unknown field %(name)s."),
            {"name": extra[0][:40] + ("…" if len(extra[0]) > 40 else "")},
            field=extra[0][:40],
        )
    req = body.get("request")
    if not isinstance(req, dict):
        raise LaunchError(
            "request_required",
            N_("request must be a sizing request object."),
            field="request",
        )
    option = body.get("option", 0)
    if isinstance(option, bool) or not isinstance(option, int) or not 0 <= option < MAX_OPTION:
        raise LaunchError(
            "option_not_index",
            N_("option must be a whole number from 0 (the answer's options, in order)."),
            field="option",
        )
    fw = body.get("framework")
    if fw is not None and (not isinstance(fw, str) or fw not in FRAMEWORKS):
        raise _unknown(str(fw))
    return req, option, fw


def launch_json(bundle: Bundle) -> str:
    """The bundle as the API answers it and the CLI prints it (the same bytes)."""
    return json.dumps(bundle.as_dict(), ensure_ascii=False, separators=(",", ":"))
