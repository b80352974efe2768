"""Input models of the quotes domain (pure pydantic: the one validation of each input)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from app.catalog.specs import all_specs
from app.errors import N_
from app.numbers import NumberError, parse_int

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MAX_CLUSTER_NODES = 10_000
MAX_CLUSTER_MONTHS = 36


def _typed_int(value: Any) -> Any:
    """Numbers a person typed go through the one number rule (app.numbers)."""
    if isinstance(value, str):
        try:
            return parse_int(value)
        except NumberError as e:
            raise ValueError(N_("Enter a whole number.")) from e
    return value


TypedInt = Annotated[int, BeforeValidator(_typed_int)]


class ClusterRequestIn(BaseModel):
    """A cluster request as typed into /cluster-request (any SKU, node count and term)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    FIELD_MESSAGES: ClassVar[dict[str, str]] = {
        "sku": N_("Pick one of the nodes in the list."),
        "nodes": N_("Enter a node count between 1 and 10,000."),
        "months": N_("The term is 1 to 36 months."),
        "start_date": N_("Enter a date (YYYY-MM-DD)."),
        "workload": N_("Tell us about the workload in a sentence or two."),
        "email": N_("Enter an email address we can reply to."),
        "name": N_("Keep it under 120 characters."),
        "company": N_("Keep it under 120 characters."),
        "sizing": N_("The sizing link is too long."),
    }

    sku: str
    nodes: TypedInt = Field(ge=1, le=MAX_CLUSTER_NODES)
    months: TypedInt = Field(ge=1, le=MAX_CLUSTER_MONTHS)
    start_date: date
    workload: str
    email: str = Field(max_length=254)
    name: str = Field(default="", max_length=120)
    company: str = Field(default="", max_length=120)
    sizing: str = Field(default="", max_length=2000)

    @field_validator("sku")
    @classmethod
    def _known_sku(cls, v: str) -> str:
        if v not in {s.id for s in all_specs()}:
            raise ValueError(N_("Pick one of the nodes in the list."))
        return v

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        if not EMAIL_RE.match(v):
            raise ValueError(N_("Enter an email address we can reply to."))
        return v.lower()

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str) -> str:
        if len(v) < 10:
            raise ValueError(N_("Tell us about the workload in a sentence or two."))
        if len(v) > 4000:
            raise ValueError(N_("Keep it under 4,000 characters."))
        return v

    @field_validator("start_date")
    @classmethod
    def _start(cls, v: date, info: ValidationInfo) -> date:
        today = (info.context or {}).get("today")
        if isinstance(today, date):
            if v < today:
                raise ValueError(N_("Pick a start date from today on."))
            if v > today + timedelta(days=730):
                raise ValueError(N_("Pick a start date within two years."))
        return v

    @field_validator("sizing")
    @classmethod
    def _sizing(cls, v: str) -> str:
        return v.lstrip("?")
