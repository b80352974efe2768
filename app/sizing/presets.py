"""Model presets with exact parameter counts and where each figure comes from.

The presets are data: ``presets.toml`` beside this module holds each model's architecture
(its config.json values), its exact published counts and their ``sources``; the file's
header says what each figure is. ``PRESETS`` maps preset id to :class:`Preset`, in the
file's order.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.sizing.params import MLA, Architecture, MoE

PRESETS_FILE = Path(__file__).with_name("presets.toml")


@dataclass(frozen=True)
class Preset:
    id: str
    name: str
    arch: Architecture
    max_seq_len: int
    published_params: int
    published_active: int | None = None
    sources: dict[str, str] = field(default_factory=dict)


def _architecture(table: dict[str, Any]) -> Architecture:
    """An ``[preset.arch]`` table (with its optional ``moe`` and ``mla`` tables)."""
    dims = dict(table)
    moe = dims.pop("moe", None)
    mla = dims.pop("mla", None)
    return Architecture(
        **dims,
        moe=MoE(**moe) if moe is not None else None,
        mla=MLA(**mla) if mla is not None else None,
    )


def _load() -> dict[str, Preset]:
    """The presets file's presets, by id, in its order."""
    rows = tomllib.loads(PRESETS_FILE.read_text(encoding="utf-8"))["preset"]
    presets = [Preset(**{**row, "arch": _architecture(row["arch"])}) for row in rows]
    return {p.id: p for p in presets}


PRESETS: dict[str, Preset] = _load()
