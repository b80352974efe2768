"""The launch-files page's context and downloads, shared by /size/launch and the console's
export for an order (same template, different inputs and links)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.responses import Response

from app.errors import N_, InvalidInput
from app.sizing.launch import FRAMEWORKS, Bundle, LaunchError
from app.web.i18n import gettext as _
from app.web.i18n import punct
from app.web.templating import format_number

LABELS = {
    "torchtitan": "torchtitan",
    "megatron": "Megatron-LM",
    "deepspeed": "DeepSpeed",
    "accelerate": "HF accelerate",
}


def refusal_text(e: LaunchError) -> str:
    """The refusal in the page's language (its parts too: "tensor parallel 8", ...)."""
    params = dict(e.params)
    if "kind_parts" in params:
        params["kinds"] = punct("list").join(_(t) % {"n": n} for t, n in params["kind_parts"])
    return _(e.template) % params if params else _(e.template)


def page_context(
    bundle: Bundle | None,
    refused: LaunchError | None,
    framework: str | None,
    *,
    page_url: Callable[[str], str],
    file_url: Callable[[str, str], str],
) -> dict[str, Any]:
    """``page_url(framework)``: this page for another framework; ``file_url(framework,
    name)``: one file's download."""
    ctx: dict[str, Any] = {
        "frameworks": [(k, LABELS[k]) for k in FRAMEWORKS],
        "bundle": None,
        "refusal": None,
        "framework": framework or "",
    }
    if refused is not None:
        ctx["refusal"] = refusal_text(refused)
        ctx["can"] = [(LABELS[k], page_url(k)) for k in refused.frameworks if k in LABELS]
        return ctx
    if bundle is None:  # nothing to export (the page says why)
        return ctx
    p = bundle.plan
    lo, hi = p.memory_range_bytes
    name, version, _r = FRAMEWORKS[bundle.framework]
    ctx.update(
        framework=bundle.framework,
        bundle=bundle,
        title=f"{name} {version}",
        option_text=f"{p.nodes} × {p.sku_name}",
        memory=_("%(gb)s GB per GPU (%(lo)s–%(hi)s GB)")
        % {
            "gb": format_number(p.memory_bytes / 1e9, 1),
            "lo": format_number(lo / 1e9, 1),
            "hi": format_number(hi / 1e9, 1),
        },
        tokens=format_number(p.tokens_per_s_per_gpu, 0) if p.tokens_per_s_per_gpu else None,
        files=[
            (i, f.name, f.content, file_url(bundle.framework, f.name))
            for i, f in enumerate(bundle.files)
        ],
    )
    return ctx


def file_response(bundle: Bundle | None, refused: LaunchError | None, name: str) -> Response:
    """One file of the bundle as a download; 422 when there is none of that name."""
    if refused is not None or bundle is None:
        raise InvalidInput(N_("This layout has no launch files for that framework."))
    for f in bundle.files:
        if f.name == name:
            return Response(
                f.content.encode(),
                media_type="text/plain; charset=utf-8",
                headers={"Content-Disposition": f'attachment; filename="{f.name}"'},
            )
    raise InvalidInput(N_("There is no launch file of that name."))
