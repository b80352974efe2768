"""The sizing request: ONE pydantic model, the single validation for API, form and CLI.

Add a request field here (and only here): give it a type, a default and its bounds in
``Field``; the JSON API's OpenAPI schema, the ``/size`` form's limits (:func:`bounds`) and the
CLI all follow. Cross-field rules that need the model's architecture live in :func:`parse`,
which turns a validated :class:`SizingRequest` into the engine's internal :class:`Request`.
Every error is a ``(field path, Msg)`` pair with a stable code (see ``messages.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, get_args

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.catalog.specs import all_specs, spec
from app.sizing.compute import training_flops
from app.sizing.errors import SizingError
from app.sizing.memory import Job, with_shared_memo
from app.sizing.messages import Msg
from app.sizing.params import (
    MLA,
    Architecture,
    MoE,
    ParamCounts,
    count,
    derive_architecture,
    pick,
)
from app.sizing.presets import PRESETS
from app.sizing.throughput import default_batch_tokens

MAX_PARAMS = 1e13
MIN_PARAMS = 1e6
MAX_TOKENS = 1e15
MAX_CUSTOM_SEQ = 1_048_576
MAX_NODES = 1024
MAX_DAYS = 3650
MAX_PARALLEL = MAX_NODES * 72

_CFG = ConfigDict(extra="forbid", allow_inf_nan=False)


def _takes(ann: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type admits one of ``kinds`` (through ``| None`` and ``Annotated``)."""
    return ann in kinds or any(_takes(a, kinds) for a in get_args(ann))


@functools.cache
def _numeric(model: type[BaseModel], name: str) -> bool:
    """Whether ``model.name`` is a number field (an int or float, not also a switch)."""
    ann = model.model_fields[name].annotation
    return _takes(ann, (int, float)) and not _takes(ann, (bool, str))


class _Spec(BaseModel):
    """A request part whose numbers are numbers: JSON ``true``/``false`` and text (``"128"``,
    ``"1e12"``) are refused where a number is expected (pydantic's lax mode would read
    ``"tokens": true`` as one token and ``"tokens": "1e12"`` as 1e12). Callers that start from
    text (the /size form, the CLI's flags) parse it into numbers first."""

    @field_validator("*", mode="before")
    @classmethod
    def _only_numbers_as_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if isinstance(v, (bool, str)) and name is not None and _numeric(cls, name):
            if isinstance(v, bool):
                raise PydanticCustomError("bool_not_number", "Input should be a number")
            raise PydanticCustomError("string_not_number", "Input should be a number")
        return v


Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16", "fp8", "fp4"]
Optimizer = Literal["adamw", "adamw8bit"]
GradDtype = Literal["bf16", "fp32"]
Recompute = Literal["none", "selective", "full"]
Sharding = Literal["ddp", "zero1", "zero2", "zero3"]
Framework = Literal["megatron", "fsdp2", "deepspeed", "hf"]
PPSchedule = Literal["1f1b", "interleaved", "gpipe"]


class MoESpec(_Spec):
    """Mixture-of-experts dimensions."""

    model_config = _CFG
    num_experts: int = Field(ge=1, le=4096)
    experts_per_token: int = Field(ge=1, le=4096)
    expert_intermediate_size: int = Field(ge=1, le=1 << 19)
    shared_experts: int = Field(0, ge=0, le=64)
    dense_layers: int = Field(0, ge=0, le=1024)


class MLASpec(_Spec):
    """Multi-head latent attention (DeepSeek-style) dimensions."""

    model_config = _CFG
    q_lora_rank: int = Field(0, ge=0, le=1 << 16)
    kv_lora_rank: int = Field(ge=1, le=1 << 16)
    qk_nope_head_dim: int = Field(ge=1, le=1 << 16)
    qk_rope_head_dim: int = Field(ge=1, le=1 << 16)
    v_head_dim: int = Field(ge=1, le=1 << 16)


class ArchitectureSpec(_Spec):
    """A transformer given by its dimensions (a Hugging Face config's numbers)."""

    model_config = _CFG
    vocab_size: int = Field(ge=2, le=1 << 22)
    hidden_size: int = Field(ge=8, le=1 << 17)
    intermediate_size: int = Field(ge=1, le=1 << 19)
    num_layers: int = Field(ge=1, le=1024)
    num_attention_heads: int = Field(ge=1, le=4096)
    num_kv_heads: int | None = Field(None, ge=1, le=4096, description="default: MHA")
    head_dim: int | None = Field(None, ge=1, le=4096, description="default: hidden / heads")
    tie_embeddings: StrictBool = False
    qkv_bias: StrictBool = False
    qk_norm: StrictBool = False
    gated_mlp: StrictBool = True
    norms_per_layer: int = Field(2, ge=0, le=8)
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    max_seq_len: int = Field(
        MAX_CUSTOM_SEQ,
        ge=1,
        le=MAX_CUSTOM_SEQ,
        description="the context the model was pre-trained with; a longer seq_len is sized "
        "with a warning",
    )


class ModelSpec(_Spec):
    """Exactly one of: a preset id, a bare parameter count, or an architecture."""

    model_config = _CFG
    preset: str | None = Field(
        None, max_length=64, description="preset id (GET /api/v1/sizing/presets)"
    )
    params: float | None = Field(None, ge=MIN_PARAMS, le=MAX_PARAMS)
    architecture: ArchitectureSpec | None = None


class ParallelismSpec(_Spec):
    """A pinned layout; omitted sizes are derived from the node count."""

    model_config = _CFG
    sharding: Sharding = "zero3"
    shard_group: int | None = Field(None, ge=1, le=MAX_PARALLEL)
    tp: int | None = Field(None, ge=1, le=MAX_PARALLEL)
    pp: int | None = Field(None, ge=1, le=MAX_PARALLEL)
    ep: int | None = Field(None, ge=1, le=MAX_PARALLEL)
    cp: int | None = Field(None, ge=1, le=MAX_PARALLEL)


class SizingRequest(_Spec):
    """A training job to size. Only ``model`` and ``tokens`` are required."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, title="SizingRequest")
    model: ModelSpec
    tokens: float = Field(gt=0, le=MAX_TOKENS, description="training tokens")
    method: Method = "full"
    seq_len: int = Field(4096, ge=16, le=MAX_CUSTOM_SEQ)
    micro_batch_size: int | None = Field(None, ge=1, le=1024, description="default 1")
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    grad_dtype: GradDtype = "bf16"
    master_weights: StrictBool = True
    recompute: Recompute | None = Field(None, description="default: searched")
    flash_attention: StrictBool = True
    parallelism: ParallelismSpec | None = Field(None, description='an object, or "auto"')
    offload_optimizer: StrictBool | None = Field(None, description="default: searched")
    offload_params: StrictBool = False
    nodes: int | None = Field(None, ge=1, le=MAX_NODES, description="fix the node count")
    sku: str | None = Field(None, max_length=64, description="evaluate one node type only")
    mfu: float | None = Field(None, gt=0, le=1, description="model FLOPs utilisation")
    lora_rank: int = Field(16, ge=1, le=4096)
    attention_flops: StrictBool = False
    token_bytes: int | None = Field(None, ge=1, le=8)
    max_days: float | None = Field(None, gt=0, le=MAX_DAYS, description="deadline in days")
    rocm_ok: StrictBool = Field(False, description="the training stack already runs on ROCm")
    framework: Framework = Field(
        "fsdp2",
        description="training stack whose memory layout to assume: megatron (Megatron-LM), "
        "fsdp2 (torchtitan-style), deepspeed (ZeRO), hf (HF Trainer / torchtune)",
    )
    compile: StrictBool = Field(False, description="torch.compile (fuses pointwise ops)")
    pp_schedule: PPSchedule = Field("1f1b", description="pipeline schedule")
    virtual_stages: int | None = Field(
        None, ge=1, le=64, description="model chunks per pipeline rank (interleaved)"
    )
    num_microbatches: int | None = Field(
        None, ge=1, le=1 << 16, description="micro-batches per step (default: fill the pipeline)"
    )
    global_batch_size: int | None = Field(
        None, ge=1, le=1 << 24, description="sequences per step (sets num_microbatches)"
    )
    activation_offload: StrictBool = Field(False, description="saved activations to host")
    optimizer_in_backward: StrictBool = Field(
        False, description="optimizer step fused into backward (no full gradient buffer)"
    )

    @field_validator("parallelism", mode="before")
    @classmethod
    def _auto(cls, v: Any) -> Any:
        return None if v == "auto" else v


def bounds(name: str, model: type[BaseModel] = SizingRequest) -> tuple[float | None, float | None]:
    """(lower, upper) of a numeric field, as declared above (the form uses these)."""
    lo: float | None = None
    hi: float | None = None
    for m in model.model_fields[name].metadata:
        if isinstance(m, (annotated_types.Ge, annotated_types.Gt)):
            lo = m.ge if isinstance(m, annotated_types.Ge) else m.gt  # type: ignore[assignment]
        elif isinstance(m, (annotated_types.Le, annotated_types.Lt)):
            lo_hi = m.le if isinstance(m, annotated_types.Le) else m.lt
            hi = lo_hi  # type: ignore[assignment]
    return lo, hi


def _field_info(loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, str]:
    """The model class and field name a pydantic error location points at."""
    model: type[BaseModel] | None = SizingRequest
    name = ""
    for part in loc:
        if not isinstance(part, str) or model is None:
            return None, name
        name = part
        info = model.model_fields.get(part)
        if info is None:
            return None, name
        nxt = None
        ann = info.annotation
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                nxt = cand
        if part is loc[-1]:
            return model, name
        model = nxt
    return model, name


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _code(err: Any) -> Msg:
    t = err["type"]
    ctx = err.get("ctx") or {}
    if t == "int_parsing_size" and isinstance(err.get("input"), float):
        # a whole number too large for an integer (1e20): out of range, not "not valid"
        t = "less_than_equal" if err["input"] > 0 else "greater_than_equal"
    if t == "missing":
        return Msg("request.required")
    if t == "extra_forbidden":
        return Msg("request.unknown_field")
    if t in ("int_from_float", "int_parsing", "int_type"):
        return Msg("request.not_whole")
    if t in ("float_parsing", "float_type", "finite_number"):
        return Msg("request.not_number")
    if t in ("bool_type", "bool_parsing"):
        return Msg("request.not_bool")
    if t == "bool_not_number":
        return Msg("request.bool_not_number")
    if t == "string_not_number":
        return Msg("request.string_not_number")
    if t in ("string_type",):
        return Msg("request.not_text")
    if t == "literal_error":
        opts = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return Msg("request.choice", {"options": opts})
    if t in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        model, name = _field_info(tuple(err["loc"]))
        lo, hi = bounds(name, model) if model is not None else (None, None)
        got = err.get("input")
        info = model.model_fields[name] if model is not None else None
        open_lo = info is not None and any(isinstance(m, annotated_types.Gt) for m in info.metadata)
        code = "request.range_open" if open_lo else "request.range"
        return Msg(code, {"lo": _fmt(lo), "hi": _fmt(hi), "got": _fmt(got)})
    if t in ("model_type", "dict_type", "model_attributes_type"):
        return Msg("request.not_object")
    return Msg("request.invalid")


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "request"


MAX_ERRORS = 20  # field errors named in one answer; the rest are counted


def validate(req: Any) -> SizingRequest:
    """Schema validation; raises SizingError naming every bad field with its code."""
    if not isinstance(req, dict):
        raise SizingError("request", Msg("request.not_object"))
    try:
        return SizingRequest.model_validate(req)
    except ValidationError as e:
        errs: list[tuple[str, Msg]] = []
        for err in e.errors():
            loc = tuple(err["loc"])
            if loc == ("model",) and err["type"] in ("missing", "model_type", "dict_type"):
                errs.append(("model", Msg("request.model_required")))
            else:
                errs.append((_path(loc), _code(err)))
        if len(errs) > MAX_ERRORS:  # 8,000 unknown keys answered 8,000 errors (695 KB)
            rest = len(errs) - MAX_ERRORS
            errs = [*errs[:MAX_ERRORS], ("request", Msg("request.more_errors", {"n": rest}))]
        raise SizingError.many(errs) from None


@dataclass(frozen=True)
class Request:
    """The validated request in the engine's terms."""

    job: Job
    model_source: str  # preset id, "params" or "architecture"
    derived: bool
    tokens: float
    mfu: float | None
    sku: str | None
    nodes: int | None
    parallelism: dict[str, Any] | None
    fixed: dict[str, Any]  # layout knobs the user pinned
    attention_flops: bool
    token_bytes: int | None
    max_days: float | None = None
    rocm_ok: bool = False
    # the context the model was pre-trained with, when ``job.seq_len`` asks for more (the run
    # is priced as asked and answered with a warning: MLPerf fine-tunes Llama 2 70B, a 4k
    # model, at 8k)
    native_seq_len: int | None = None


def scaled_counts(c: ParamCounts, target: int) -> ParamCounts:
    f = target / c.total
    return ParamCounts(
        total=target,
        active=target,
        embedding=int(c.embedding * f),
        head=int(c.head * f),
        final_norm=c.final_norm,
        dense_layer=int(c.dense_layer * f),
        moe_layer=0,
        moe_layer_experts=0,
        largest_unit=int(c.largest_unit * f),
    )


# fields a validated request hands on as they are, by the same name
_ARCH_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers",
                "num_attention_heads", "tie_embeddings", "qkv_bias", "qk_norm",
                "norms_per_layer", "gated_mlp")  # fmt: skip
_JOB_FIELDS = ("method", "seq_len", "precision", "optimizer", "grad_dtype", "master_weights",
               "flash_attention", "lora_rank", "framework", "compile", "optimizer_in_backward",
               "activation_offload", "pp_schedule")  # fmt: skip
_REQUEST_FIELDS = ("tokens", "mfu", "sku", "nodes", "attention_flops", "token_bytes", "max_days",
                   "rocm_ok")  # fmt: skip


def _architecture(a: ArchitectureSpec, errs: list[tuple[str, Msg]]) -> Architecture | None:
    p = "model.architecture"
    kv = a.num_kv_heads or a.num_attention_heads
    if a.num_attention_heads % kv:
        errs.append((p + ".num_kv_heads", Msg("request.kv_heads_divide")))
    moe = None
    if a.moe is not None:
        m = a.moe
        if m.experts_per_token > m.num_experts:
            errs.append((p + ".moe.experts_per_token", Msg("request.experts_per_token")))
        if m.dense_layers >= a.num_layers:
            errs.append((p + ".moe.dense_layers", Msg("request.dense_layers")))
        moe = MoE(
            m.num_experts,
            m.experts_per_token,
            m.expert_intermediate_size,
            m.shared_experts,
            m.dense_layers,
        )
    mla = None
    if a.mla is not None:
        x = a.mla
        mla = MLA(
            x.q_lora_rank, x.kv_lora_rank, x.qk_nope_head_dim, x.qk_rope_head_dim, x.v_head_dim
        )
    if errs:
        return None
    return Architecture(
        **pick(a, _ARCH_FIELDS),
        num_kv_heads=kv,
        head_dim=a.head_dim or max(1, a.hidden_size // a.num_attention_heads),
        moe=moe,
        mla=mla,
    )


def parse(req: Any) -> Request:
    """Validate ``req`` (a JSON object) and resolve the model; raises SizingError."""
    return resolve(validate(req))


def resolve(s: SizingRequest) -> Request:
    """The cross-field rules and the model's architecture; raises SizingError."""
    errs: list[tuple[str, Msg]] = []
    arch: Architecture | None = None
    counts: ParamCounts | None = None
    max_seq = MAX_CUSTOM_SEQ
    source, derived = "", False
    given = [k for k in ("preset", "params", "architecture") if getattr(s.model, k) is not None]
    if len(given) != 1:
        errs.append(("model", Msg("request.model_one_of")))
    elif s.model.preset is not None:
        pr = PRESETS.get(s.model.preset)
        if pr is None:
            errs.append(("model.preset", Msg("request.unknown_preset", {"preset": s.model.preset})))
        else:
            arch, counts, max_seq, source = pr.arch, count(pr.arch), pr.max_seq_len, pr.id
    elif s.model.params is not None:
        arch = derive_architecture(s.model.params)
        counts = scaled_counts(count(arch), int(s.model.params))
        source, derived = "params", True
    elif s.model.architecture is not None:
        arch = _architecture(s.model.architecture, errs)
        max_seq = s.model.architecture.max_seq_len
        if arch is not None:
            counts, source = count(arch), "architecture"
    native_seq_len = max_seq if arch is not None and s.seq_len > max_seq else None
    ids = [sp.id for sp in all_specs()]
    if s.sku is not None and s.sku not in ids:
        errs.append(("sku", Msg("request.unknown_sku", {"sku": s.sku, "skus": ids})))
    par: dict[str, Any] | None = None
    if s.parallelism is not None:
        par = s.parallelism.model_dump()
        if arch is not None:
            if par["pp"] and par["pp"] > arch.num_layers:
                errs.append(("parallelism.pp", Msg("request.pp_layers")))
            if par["tp"] and arch.num_attention_heads % par["tp"]:
                errs.append(("parallelism.tp", Msg("request.tp_heads")))
            elif par["tp"] and arch.num_kv_heads % par["tp"]:
                errs.append(("parallelism.tp", Msg("request.tp_kv_heads")))
            if par["ep"] and par["ep"] > 1:
                if arch.moe is None:
                    errs.append(("parallelism.ep", Msg("request.ep_moe")))
                elif arch.moe.num_experts % par["ep"]:
                    errs.append(("parallelism.ep", Msg("request.ep_experts")))
        if s.offload_params and par["sharding"] != "zero3":
            errs.append(("offload_params", Msg("request.offload_params_zero3")))
    if s.method != "full" and s.precision == "fp4":
        errs.append(("precision", Msg("request.fp4_full_only")))
    if s.precision == "fp4" and s.sku in ids and not spec(s.sku).fp4_dense_tflops:
        with_fp4 = [sp.id for sp in all_specs() if sp.fp4_dense_tflops]
        errs.append(("precision", Msg("request.fp4_no_peak", {"sku": s.sku, "skus": with_fp4})))
    if s.virtual_stages is not None and s.virtual_stages > 1 and s.pp_schedule != "interleaved":
        errs.append(("virtual_stages", Msg("request.virtual_stages_interleaved")))
    if s.num_microbatches is not None and s.global_batch_size is not None:
        errs.append(("global_batch_size", Msg("request.microbatches_one_of")))
    if errs:
        raise SizingError.many(errs)
    assert arch is not None and counts is not None
    job = Job(
        arch=arch,
        counts=counts,
        **pick(s, _JOB_FIELDS),
        virtual_stages=s.virtual_stages or (2 if s.pp_schedule == "interleaved" else 1),
        num_microbatches=s.num_microbatches or 0,
        global_batch_size=s.global_batch_size or 0,
        batch_tokens=0
        if s.num_microbatches or s.global_batch_size
        else max(  # at least one sequence per step
            s.seq_len,
            default_batch_tokens(training_flops(counts.active, s.tokens, method=s.method)),
        ),
    )
    job = with_shared_memo(job)
    fixed: dict[str, Any] = {"micro_batch_size": s.micro_batch_size or 1}
    if s.recompute is not None:
        fixed["recompute"] = s.recompute
    if s.offload_optimizer is not None:
        fixed["offload_optimizer"] = s.offload_optimizer
    fixed["offload_params"] = s.offload_params
    return Request(
        job=job,
        model_source=source,
        derived=derived,
        parallelism=par,
        fixed=fixed,
        native_seq_len=native_seq_len,
        **pick(s, _REQUEST_FIELDS),
    )


def json_schema() -> dict[str, Any]:
    """The request's JSON schema with every definition inlined (for OpenAPI)."""
    schema = SizingRequest.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(x: Any) -> Any:
        if isinstance(x, dict):
            ref = x.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.split("/")[-1]])
            return {k: inline(v) for k, v in x.items()}
        if isinstance(x, list):
            return [inline(v) for v in x]
        return x

    out: dict[str, Any] = inline(schema)
    return out
