"""Sizing engine: will a training job fit, on which node, how long, at what cost.

Pure (standard library, pydantic + ``app.catalog.specs``). Public API::

    from app.sizing import size, SizingError, PRESETS, list_presets
    size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12})
"""

from __future__ import annotations

from app.sizing.engine import (
    REFERENCE_JOB,
    largest_full_training_model,
    list_presets,
    parse,
    reference_mfu,
    size,
    size_result,
)
from app.sizing.errors import SizingError
from app.sizing.messages import Msg, render
from app.sizing.presets import PRESETS, Preset
from app.sizing.request import SizingRequest

__all__ = [
    "PRESETS",
    "REFERENCE_JOB",
    "Msg",
    "Preset",
    "SizingError",
    "SizingRequest",
    "largest_full_training_model",
    "list_presets",
    "parse",
    "reference_mfu",
    "render",
    "size",
    "size_result",
]
