"""Input models of the quotes domain (pure pydantic: the one validation of each input)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from app.catalog.specs import all_specs, spec
from app.errors import N_
from app.numbers import MESSAGES_EN, NumberError, parse_int, parse_percent_bp
from app.quotes import pricing
from app.text import multi_line, printable_only, single_line

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MAX_CLUSTER_NODES = 10_000
MAX_CLUSTER_MONTHS = 36


def _typed_int(value: Any) -> Any:
    """Numbers a person typed go through the one number rule (app.numbers); JSON true and
    false are not numbers."""
    if isinstance(value, bool):
        raise ValueError(N_("Enter a whole number."))
    if isinstance(value, str):
        try:
            return parse_int(value)
        except NumberError as e:
            if e.code == "number.negative":  # "-1": the field's range says what is allowed
                return -parse_int(value.strip()[1:])
            # what is wrong with it ("Enter a number using the digits 0–9." for "١٢"), in the
            # number rule's words (the same msgids as app.web.numbers)
            raise ValueError(MESSAGES_EN.get(e.code, N_("Enter a whole number."))) from e
    return value


TypedInt = Annotated[int, BeforeValidator(_typed_int)]


def _sku_id(message: str) -> AfterValidator:
    """One of the catalog's SKU ids, else ``message``."""

    def check(v: str) -> str:
        if v not in {s.id for s in all_specs()}:
            raise ValueError(message)
        return v

    return AfterValidator(check)


def _email_address(message: str) -> AfterValidator:
    """An email address (lower-cased), else ``message``."""

    def check(v: str) -> str:
        if not EMAIL_RE.match(v):
            raise ValueError(message)
        return v.lower()

    return AfterValidator(check)


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

    sku: Annotated[str, _sku_id(N_("Pick one of the nodes in the list."))]
    nodes: TypedInt = Field(ge=1, le=MAX_CLUSTER_NODES)
    months: TypedInt = Field(ge=1, le=MAX_CLUSTER_MONTHS)
    start_date: date
    workload: str
    email: Annotated[
        str, Field(max_length=254), _email_address(N_("Enter an email address we can reply to."))
    ]
    name: str = Field(default="", max_length=120)
    company: str = Field(default="", max_length=120)
    sizing: str = Field(default="", max_length=2000)

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


def _optional_int(value: Any) -> Any:
    """An empty optional number is "use the default"."""
    if isinstance(value, str) and not value.strip():
        return None
    return _typed_int(value)


OptionalTypedInt = Annotated[int | None, BeforeValidator(_optional_int)]


class QuoteIn(BaseModel):
    """The quote builder's input: the one validation of each field, for the staff form and
    the seed (CLI). Cross-field rules (terms per SKU kind, the sizing link) are checked by
    ``app.quotes.service.quote_input``."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    FIELD_MESSAGES: ClassVar[dict[str, str]] = {
        "prospect_name": N_("Keep it under 120 characters."),
        "prospect_email": N_("Enter the prospect's email address."),
        "prospect_company": N_("Keep it under 120 characters."),
        "sku": N_("Choose a node or the GB300 NVL72 rack."),
        "quantity": N_("Enter a whole number."),
        "months": N_("Enter a whole number."),
        "valid_days": N_("A quote is valid for 1 to 30 days."),
        "sizing": N_("The sizing link is too long."),
        "sizing_notes": N_("Keep it under 4,000 characters."),
        "notes": N_("Keep it under 4,000 characters."),
        "note_model_size": N_("Keep this under 80 characters."),
        "note_token_budget": N_("Keep this under 80 characters."),
        "note_comm_pattern": N_("Keep this under 300 characters."),
    }

    prospect_name: str = Field(default="", max_length=120)
    prospect_email: Annotated[
        str, Field(max_length=254), _email_address(N_("Enter the prospect's email address."))
    ] = ""
    prospect_company: str = Field(default="", max_length=120)
    sku: Annotated[str, _sku_id(N_("Choose a node or the GB300 NVL72 rack."))] = ""
    quantity: TypedInt
    months: OptionalTypedInt = None
    # Typed as a percentage under the form field "discount"; held in basis points.
    discount_bp: int = Field(default=0, validation_alias="discount")
    valid_days: OptionalTypedInt = Field(default=None, ge=1, le=pricing.MAX_VALID_DAYS)
    sizing: str = Field(default="", max_length=2000)
    sizing_notes: str = Field(default="", max_length=4000)
    notes: str = Field(default="", max_length=4000)
    note_model_size: str = Field(default="", max_length=80)
    note_token_budget: str = Field(default="", max_length=80)
    note_comm_pattern: str = Field(default="", max_length=300)

    @field_validator(
        "prospect_name",
        "prospect_company",
        "note_model_size",
        "note_token_budget",
        "note_comm_pattern",
        mode="before",
    )
    @classmethod
    def _one_line(cls, v: Any) -> Any:
        # Short fields may reach PDF metadata and email headers: one line, no controls, no
        # escape sequences or zero-width characters.
        return single_line(printable_only(v)) if isinstance(v, str) else v

    @field_validator("sizing_notes", "notes", mode="before")
    @classmethod
    def _notes(cls, v: Any) -> Any:
        return multi_line(printable_only(v)) if isinstance(v, str) else v

    # The terms depend on the kind of SKU (validated above: fields run in order), so every
    # problem is reported at once, next to its field.
    @field_validator("quantity")
    @classmethod
    def _quantity_terms(cls, v: int, info: ValidationInfo) -> int:
        kind = _kind(info)
        if kind is not None:
            months = pricing.MIN_RACK_MONTHS if kind == pricing.QuoteKind.rack else 1
            problem = pricing.check_terms(kind, v, months).get("quantity")
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("months")
    @classmethod
    def _months_terms(cls, v: int | None, info: ValidationInfo) -> int | None:
        kind = _kind(info)
        if v is not None and kind is not None:
            quantity = pricing.RACK_GPUS if kind == pricing.QuoteKind.rack else 1
            problem = pricing.check_terms(kind, quantity, v).get("months")
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("discount_bp", mode="before")
    @classmethod
    def _discount(cls, v: Any) -> int:
        if v is None or (isinstance(v, str) and not v.strip()):
            return 0
        try:
            return parse_percent_bp(str(v), max_bp=pricing.MAX_DISCOUNT_BP)
        except NumberError as e:
            if e.code == "number.too_large":
                raise ValueError(N_("The discount cannot exceed 50 %.")) from None
            raise ValueError(
                N_("Enter the discount as a percentage, e.g. 7.5 (at most two decimals).")
            ) from None


def _kind(info: ValidationInfo) -> str | None:
    sku_id = info.data.get("sku")
    if not sku_id:
        return None
    return (
        pricing.QuoteKind.rack.value if spec(sku_id).price_per_gpu else pricing.QuoteKind.node.value
    )
