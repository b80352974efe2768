"""Typed request parameters shared by routes: ids and paging within what the database holds."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import BaseModel, Field

MAX_ID = 2**63 - 1  # BIGINT / SQLite INTEGER

RowId = Annotated[int, Path(ge=1, le=MAX_ID, description="a positive id")]
Limit = Annotated[int, Query(ge=1, le=200, description="how many rows (1–200)")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="rows to skip")]


class Paged(BaseModel):
    """A paged list's query: which page (from 1). A list's filters extend it, to be read as
    one ``Annotated[TheirModel, Query()]``."""

    page: int = Field(1, ge=1, le=100_000)
