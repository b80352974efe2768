"""The /size form: query-string parameters → a sizing-engine request, with field errors.

Everything the customer typed stays in the query string so a result is a shareable URL.
Parsing is forgiving where people are ("1T", "300B", "2e12", "1,000,000", "40 %", "4k"),
strict where the engine needs it, and every problem is reported next to its field.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from app import numbers
from app.catalog.specs import all_specs
from app.errors import N_
from app.sizing.messages import Msg
from app.sizing.request import (
    MAX_PARAMS,
    MAX_TOKENS,
    MIN_PARAMS,
    ArchitectureSpec,
    Framework,
    MoESpec,
    ParallelismSpec,
    SizingRequest,
    bounds,
)

DEFAULTS: dict[str, str] = {
    "model": "llama-3.1-8b",
    "tokens": "1T",
    "seq_len": "4096",
    "mbs": "1",
    "precision": "bf16",
    "method": "full",
    "recompute": "auto",
    "par": "auto",
    "sharding": "zero3",
}

ARCH_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
)
MOE_FIELDS = ("num_experts", "experts_per_token", "expert_intermediate_size")
PAR_INT_FIELDS = ("shard_group", "tp", "pp", "ep", "cp")

# Query parameter names, in the order they appear in a canonical (shareable) URL.
FIELDS = (
    *("model", "params", *ARCH_FIELDS, "head_dim", "tie_embeddings", *MOE_FIELDS),
    *("tokens", "seq_len", "mbs", "gbs", "precision", "method", "recompute", "framework"),
    "compile",
    *("par", "sharding", *PAR_INT_FIELDS, "mfu", "days", "rocm", "sku", "nodes"),
)

PRECISIONS = ("bf16", "fp8", "fp4")
METHODS = ("full", "lora", "qlora")
RECOMPUTES = ("auto", "none", "selective", "full")
FRAMEWORKS = typing.get_args(Framework)  # the training stacks the engine has profiles for
SHARDINGS = ("ddp", "zero1", "zero2", "zero3")

MAX_VALUE_LEN = 40

# Messages shown next to fields (translated at render time).
E_REQUIRED = N_("Please enter a value.")
E_NUMBER = N_("Enter a number such as 7B, 300B, 1T or 2e12.")
E_WHOLE = N_("Enter a whole number.")
E_POSITIVE = N_("Enter a number greater than zero.")
E_TOO_BIG = N_("This number is too large.")
E_CHOICE = N_("Choose one of the listed options.")
E_MFU = N_("Enter a utilisation between 1 and 100 %.")
E_UNKNOWN_MODEL = N_("Choose a model from the list, or enter a parameter count.")
E_MOE_ALL = N_("Fill in all three mixture-of-experts fields, or none.")
E_ENGINE = N_("This value is outside what the sizing model covers.")
E_AT_LEAST = N_("Enter at least %(min)s.")
E_AT_MOST = N_("Enter at most %(max)s.")
E_DIGITS = N_("Enter a number using the digits 0–9.")
E_NOT_NEGATIVE = N_("Enter a number that is not negative.")
E_TOKENS_UNIT = N_("Use a plain number, an exponent (1.5e12) or a suffix K, M, B, T, 万 or 亿.")

# the node select's options (an unknown one is the select's error, not the engine's)
_SKU_IDS = frozenset(s.id for s in all_specs())

# app.numbers error codes → the message shown next to the field
NUMBER_MESSAGES = {
    "number.empty": E_REQUIRED,
    "number.invalid": E_DIGITS,
    "number.not_whole": E_WHOLE,
    "number.negative": E_NOT_NEGATIVE,
    "number.too_small": E_AT_LEAST,
    "number.too_large": E_AT_MOST,
    "tokens.unit": E_TOKENS_UNIT,
}

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
# a whole number too long for the number rule: only digits (ASCII or full-width)
_LONG_DIGITS = re.compile(r"[0-9０-９]{31,}")
_NUM_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgtp]?)$")


class FieldError(ValueError):
    def __init__(self, message: str, params: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.params = params or {}

    @classmethod
    def of(cls, e: numbers.NumberError) -> FieldError:
        return cls(NUMBER_MESSAGES.get(e.code, E_NUMBER), e.shown_params)  # limits grouped


def _int_bounds(name: str, model: Any = SizingRequest) -> tuple[int, int]:
    lo, hi = bounds(name, model)
    return int(lo or 1), int(hi or 10**9)


def parse_whole(text: str, name: str, model: Any = SizingRequest, *, binary_k: bool = False) -> int:
    """A whole number within the request model's bounds for ``name`` (the one number rule;
    "4k" = 4096 where ``binary_k``)."""
    lo, hi = _int_bounds(name, model)
    # the raw text goes to the number rule: it refuses "²", "①" and other scripts' digits
    # before NFKC would fold them into ASCII ones ("mbs=²" is not 2)
    t = text.strip()
    mult = 1
    if binary_k and numbers.normalise(t[-1:]) in ("k", "K"):
        t, mult = t[:-1].strip(), 1024
    try:
        v = numbers.parse_int(t) * mult
    except numbers.NumberError as e:
        if e.code == "number.invalid" and _LONG_DIGITS.fullmatch(re.sub(r"[\s,，]", "", t)):
            raise FieldError(E_AT_MOST, {"max": hi}) from None  # digits, just too many
        if e.code == "number.negative" and lo >= 1:  # "not negative" would invite a 0
            raise FieldError(E_AT_LEAST, {"min": lo}) from None
        raise FieldError.of(e) from None
    if v < lo:
        raise FieldError(E_AT_LEAST, {"min": lo})
    if v > hi:
        raise FieldError(E_AT_MOST, {"max": hi})
    return v


def parse_amount(text: str, *, binary_k: bool = False) -> float:
    """Parse friendly amounts: "1T", "300B", "2e12", "1,000,000", "7.5 b", "4k".

    ``binary_k`` makes "k" mean 1024 (context lengths: "4k" = 4096, "128k" = 131072).
    """
    s = text.strip().lower().replace(",", "").replace("_", "").replace(" ", "")
    for word in ("tokens", "token", "params", "parameters", "param"):
        if s.endswith(word):
            s = s[: -len(word)]
    # no amount is this long; and _NUM_RE backtracks quadratically on a long non-number
    m = _NUM_RE.match(s) if len(s) <= 40 else None
    if not m:
        raise FieldError(E_NUMBER)
    try:
        value = float(m.group(1))
    except ValueError as e:  # pragma: no cover - the regex only admits floats
        raise FieldError(E_NUMBER) from e
    suffix = m.group(2)
    mult = 1024.0 if (binary_k and suffix == "k") else _SUFFIX[suffix]
    value *= mult
    if not math.isfinite(value):
        raise FieldError(E_TOO_BIG)
    return value


def parse_percent(text: str) -> float:
    try:  # the one digit rule first: float() would read "٣" (Arabic-Indic three) as 3
        numbers.check_digits(text)
        s = numbers.normalise(text).replace("%", "").strip()
        v = float(s)
    except (numbers.NumberError, ValueError) as e:
        raise FieldError(E_MFU) from e
    if not math.isfinite(v):
        raise FieldError(E_MFU)
    if 0 < v <= 1 and "." in s:  # "0.4" means 40 %
        v *= 100
    if not 1 <= v <= 100:
        raise FieldError(E_MFU)
    return v / 100.0


def human_count(n: float) -> str:
    """8.03e9 → "8.0B", 1e12 → "1T" (for notes and labels)."""
    for div, suf in ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            v = n / div
            txt = f"{v:.1f}" if v < 100 else f"{v:.0f}"
            if txt.endswith(".0") and suf in ("T", "P"):
                txt = txt[:-2]
            return f"{txt}{suf}"
    return f"{n:.0f}"


@dataclass
class SizeForm:
    """What the customer typed (``values``), the engine request, and field errors."""

    values: dict[str, str]
    request: dict[str, Any] | None = None
    # field → a message id (``error_params`` fill it) or an engine Msg
    errors: dict[str, str | Msg] = field(default_factory=dict)
    error_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (values it was built from, the query): a page builds the same link once per card
    _query: tuple[tuple[tuple[str, str], ...], str] | None = field(
        default=None, repr=False, compare=False
    )

    def fail(self, name: str, e: FieldError) -> None:
        self.errors[name] = e.message
        if e.params:
            self.error_params[name] = e.params

    def whole(
        self,
        into: dict[str, Any],
        name: str,
        key: str | None = None,
        model: Any = SizingRequest,
        *,
        binary_k: bool = False,
    ) -> None:
        """Field ``name``, when filled, as a whole number at ``into[key]`` (default: the
        same name) within ``model``'s bounds for it; otherwise its error."""
        if self.values[name]:
            key = key or name
            try:
                into[key] = parse_whole(self.values[name], key, model, binary_k=binary_k)
            except FieldError as e:
                self.fail(name, e)

    @property
    def ok(self) -> bool:
        return self.request is not None and not self.errors

    def query_string(self) -> str:
        """Canonical shareable query: non-empty fields in a fixed order."""
        seen = tuple(self.values.items())
        if self._query is not None and self._query[0] == seen:
            return self._query[1]
        skip: set[str] = set()
        if self.values.get("par") != "explicit":
            skip.update(("sharding", *PAR_INT_FIELDS))
        if self.values.get("model") != "params":
            skip.add("params")
        if self.values.get("model") != "arch":
            skip.update((*ARCH_FIELDS, "head_dim", "tie_embeddings", *MOE_FIELDS))
        pairs = [(k, self.values[k]) for k in FIELDS if self.values.get(k) and k not in skip]
        self._query = (seen, urlencode(pairs))
        return self._query[1]


def _get(q: Mapping[str, str], name: str) -> str:
    v = q.get(name)
    if v is None:
        return ""
    return str(v).strip()[:MAX_VALUE_LEN]


def parse_query(q: Mapping[str, str], preset_ids: set[str] | frozenset[str]) -> SizeForm:
    """Turn query parameters into an engine request; never raises on any input."""
    empty = not any(_get(q, k) for k in FIELDS)
    values = {k: _get(q, k) for k in FIELDS}
    if empty:
        values.update(DEFAULTS)
    for k, v in DEFAULTS.items():
        if not values.get(k) and k in ("precision", "method", "recompute", "par", "sharding"):
            values[k] = v
    if values.get("tie_embeddings") not in ("", "1"):
        values["tie_embeddings"] = "1"
    form = SizeForm(values=values)
    errs = form.errors
    req: dict[str, Any] = {}

    # Model: a preset, a parameter count, or an architecture.
    model = values["model"]
    if model in preset_ids:
        req["model"] = {"preset": model}
    elif model == "params":
        if not values["params"]:
            errs["params"] = E_REQUIRED
        else:
            try:
                n = parse_amount(values["params"])
                if n <= 0:
                    raise FieldError(E_POSITIVE)
                if n < MIN_PARAMS:  # the form's words, not the engine's "got 5"
                    raise FieldError(E_AT_LEAST, {"min": "1M"})
                if n > MAX_PARAMS:
                    raise FieldError(E_TOO_BIG)
                req["model"] = {"params": n}
            except FieldError as e:
                form.fail("params", e)
    elif model == "arch":
        arch: dict[str, Any] = {}
        names = {"num_heads": "num_attention_heads"}
        for f in ARCH_FIELDS:
            if not values[f]:
                errs[f] = E_REQUIRED
                continue
            form.whole(arch, f, names.get(f, f), ArchitectureSpec, binary_k=True)
        form.whole(arch, "head_dim", model=ArchitectureSpec)
        arch["tie_embeddings"] = values["tie_embeddings"] == "1"
        moe_given = [f for f in MOE_FIELDS if values[f]]
        if moe_given:
            if len(moe_given) != len(MOE_FIELDS):
                for f in MOE_FIELDS:
                    if not values[f]:
                        errs[f] = E_MOE_ALL
            moe: dict[str, Any] = {}
            for f in moe_given:
                form.whole(moe, f, model=MoESpec, binary_k=True)
            arch["moe"] = moe
        req["model"] = {"architecture": arch}
    else:
        errs["model"] = E_UNKNOWN_MODEL

    # Job.
    if not values["tokens"]:
        errs["tokens"] = E_REQUIRED
    else:
        try:
            try:
                t = numbers.parse_token_count(
                    values["tokens"], min_value=1, max_value=int(MAX_TOKENS)
                )
            except numbers.NumberError as ne:
                if ne.code == "number.negative":  # "not negative" would invite a 0
                    raise FieldError(E_AT_LEAST, {"min": 1}) from None
                raise FieldError.of(ne) from None
            req["tokens"] = float(t)
        except FieldError as e:
            form.fail("tokens", e)
    form.whole(req, "seq_len", binary_k=True)
    form.whole(req, "mbs", "micro_batch_size")
    # empty: the engine prices the run's compute-optimal batch
    form.whole(req, "gbs", "global_batch_size")
    for name, key, choices in (
        ("precision", "precision", PRECISIONS),
        ("method", "method", METHODS),
        ("recompute", "recompute", RECOMPUTES),
    ):
        v = values[name]
        if v not in choices:
            errs[name] = E_CHOICE
        elif not (name == "recompute" and v == "auto"):
            req[key] = v
    # The training stack: empty is the engine's default (its request model says which).
    if values["framework"]:
        if values["framework"] not in FRAMEWORKS:
            errs["framework"] = E_CHOICE
        else:
            req["framework"] = values["framework"]
    # torch.compile: empty is off (eager), the engine's default
    if values["compile"] not in ("", "0", "1"):
        errs["compile"] = E_CHOICE
    elif values["compile"] == "1":
        req["compile"] = True

    # Parallelism.
    if values["par"] == "explicit":
        par: dict[str, Any] = {}
        if values["sharding"] not in SHARDINGS:
            errs["sharding"] = E_CHOICE
        else:
            par["sharding"] = values["sharding"]
        for f in PAR_INT_FIELDS:
            form.whole(par, f, model=ParallelismSpec)
        req["parallelism"] = par
    elif values["par"] != "auto":
        errs["par"] = E_CHOICE

    if values["mfu"]:
        try:
            req["mfu"] = parse_percent(values["mfu"])
        except FieldError as e:
            form.fail("mfu", e)
    form.whole(req, "days", "max_days")
    if values["rocm"] not in ("", "0", "1"):
        errs["rocm"] = E_CHOICE
    elif values["rocm"] == "1":
        req["rocm_ok"] = True
    if values["sku"]:
        if values["sku"] in _SKU_IDS:
            req["sku"] = values["sku"]
        else:  # the node list is a select: not the engine's list of ids, not the text echoed
            errs["sku"] = E_CHOICE
    form.whole(req, "nodes")

    if not errs:
        form.request = req
    return form


# Engine field paths (``SizingError.errors``) → the form field to show the message at.
_ENGINE_FIELD = {
    "model": "model",
    "model.preset": "model",
    "model.params": "params",
    "model.architecture.num_attention_heads": "num_heads",
    "tokens": "tokens",
    "seq_len": "seq_len",
    "micro_batch_size": "mbs",
    "global_batch_size": "gbs",
    "precision": "precision",
    "method": "method",
    "recompute": "recompute",
    "framework": "framework",
    "compile": "compile",
    "parallelism": "par",
    "mfu": "mfu",
    "max_days": "days",
    "rocm_ok": "rocm",
    "sku": "sku",
    "nodes": "nodes",
    "offload_params": "par",
}


def engine_field(path: str, form: SizeForm) -> str:
    """Where an engine error about ``path`` is shown on the form."""
    if path in _ENGINE_FIELD:
        return _ENGINE_FIELD[path]
    tail = path.rsplit(".", 1)[-1]
    if path.startswith("parallelism."):
        return tail if tail in PAR_INT_FIELDS or tail == "sharding" else "par"
    if path.startswith("model.architecture"):
        if tail in ARCH_FIELDS or tail in MOE_FIELDS or tail == "head_dim":
            return tail
        return "model"
    if path.startswith("model"):
        return "params" if form.values.get("model") == "params" else "model"
    return "model"
