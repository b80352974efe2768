"""The communication pattern of a sizing option in a few words (pure)."""

from __future__ import annotations

from typing import Any

from app.sizing.messages import Msg, Translate, render


def comm_pattern(option: dict[str, Any], translate: Translate | None = None) -> str:
    """A short description of the communication, for the engineers' notes, in the language
    of ``translate`` (English without one): the layout from its code (the English
    description when the option has no code), and the collective when nodes exchange
    gradients ("all-reduce" and "reduce-scatter" stay Latin: they are the names NCCL uses)."""
    code = option.get("layout_description_code")
    if code and translate is not None:
        desc = render(code, translate)
    else:
        desc = str(option.get("layout_description") or "")
    lay = option.get("layout") or {}
    nodes = int(option.get("nodes") or 1)
    if nodes > 1 and (lay.get("dp") or 1) > 1:
        coll = "all-reduce" if lay.get("sharding") in ("ddp", "zero1") else "reduce-scatter"
        if not desc:
            return coll
        return render(Msg("comm.with_collective", {"layout": desc, "collective": coll}), translate)
    return desc
