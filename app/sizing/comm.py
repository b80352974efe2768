"""The communication pattern of a sizing option in a few words (pure)."""

from __future__ import annotations

from typing import Any


def comm_pattern(option: dict[str, Any]) -> str:
    """A short description of the communication, for the engineers' notes (English)."""
    desc = str(option.get("layout_description") or "")
    lay = option.get("layout") or {}
    nodes = int(option.get("nodes") or 1)
    if nodes > 1 and (lay.get("dp") or 1) > 1:
        coll = "all-reduce" if lay.get("sharding") in ("ddp", "zero1") else "reduce-scatter"
        desc = f"{desc} ({coll})" if desc else coll
    return desc
