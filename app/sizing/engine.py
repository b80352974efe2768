"""Request validation, the per-SKU search and the response (``size``)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.catalog.specs import NodeSpec, all_specs, spec
from app.sizing import compute, layout
from app.sizing.errors import SizingError
from app.sizing.memory import (
    CE_BYTES_PER_LOGIT,
    CUDA_CONTEXT_BYTES,
    FRAGMENTATION,
    NCCL_BYTES_PER_GROUP,
    SAFETY_MARGIN,
    Job,
    Layout,
    Memory,
    memory,
)
from app.sizing.params import MLA, Architecture, MoE, ParamCounts, count, derive_architecture
from app.sizing.presets import PRESETS

REQUEST_KEYS = {
    "model",
    "method",
    "tokens",
    "seq_len",
    "micro_batch_size",
    "precision",
    "optimizer",
    "grad_dtype",
    "master_weights",
    "recompute",
    "flash_attention",
    "parallelism",
    "offload_optimizer",
    "offload_params",
    "nodes",
    "sku",
    "mfu",
    "lora_rank",
    "attention_flops",
    "token_bytes",
    "max_days",
    "rocm_ok",
}
ARCH_KEYS = {
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "tie_embeddings",
    "qkv_bias",
    "qk_norm",
    "gated_mlp",
    "norms_per_layer",
    "moe",
    "mla",
    "max_seq_len",
}
MOE_KEYS = {
    "num_experts",
    "experts_per_token",
    "expert_intermediate_size",
    "shared_experts",
    "dense_layers",
}
MLA_KEYS = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
PAR_KEYS = {"sharding", "shard_group", "tp", "pp", "ep", "cp"}
CHOICES = {
    "method": ("full", "lora", "qlora"),
    "precision": ("bf16", "fp8", "fp4"),
    "optimizer": ("adamw", "adamw8bit"),
    "grad_dtype": ("bf16", "fp32"),
    "recompute": ("none", "selective", "full"),
}
MAX_PARAMS = 1e13
MAX_TOKENS = 1e15
MAX_CUSTOM_SEQ = 1_048_576
MAX_NODES = 1024
SINGLE_GPU_MAX_DAYS = 7.0
SEARCH_BUDGET = 24  # node counts priced per SKU after the first that fits
# Costs within this fraction count as equal; among equals the faster layout wins (rentals
# are whole node-months, so 1 node for 24 months and 24 nodes for 1 month cost the same).
COST_TIE = 0.02
# Beyond this many nodes a cluster is a sales conversation, not a self-serve checkout.
SELF_SERVE_MAX_NODES = 16


@dataclass(frozen=True)
class Request:
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


# --- validation -----------------------------------------------------------------------------


class _V:
    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []

    def err(self, field: str, msg: str) -> None:
        self.errors.append((field, msg))

    def int_(
        self,
        d: dict[str, Any],
        key: str,
        path: str,
        *,
        lo: int,
        hi: int,
        default: int | None = None,
        required: bool = False,
    ) -> int | None:
        if key not in d or d[key] is None:
            if required:
                self.err(path, "is required")
            return default
        v = d[key]
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or (isinstance(v, float) and (not math.isfinite(v) or v != int(v)))
        ):
            self.err(path, "must be a whole number")
            return default
        iv = int(v)
        if not lo <= iv <= hi:
            self.err(path, f"must be between {lo} and {hi}, got {iv}")
            return default
        return iv

    def num(
        self,
        d: dict[str, Any],
        key: str,
        path: str,
        *,
        lo: float,
        hi: float,
        lo_open: bool = True,
        required: bool = False,
    ) -> float | None:
        if key not in d or d[key] is None:
            if required:
                self.err(path, "is required")
            return None
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.err(path, "must be a finite number")
            return None
        if (v <= lo if lo_open else v < lo) or v > hi:
            self.err(path, f"must be {'>' if lo_open else '>='} {lo:g} and <= {hi:g}, got {v:g}")
            return None
        return float(v)

    def bool_(self, d: dict[str, Any], key: str, path: str, default: bool) -> bool:
        v = d.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            self.err(path, "must be true or false")
            return default
        return v

    def choice(self, d: dict[str, Any], key: str, path: str, default: str) -> str:
        v = d.get(key)
        if v is None:
            return default
        opts = CHOICES[key]
        if v not in opts:
            self.err(path, f"must be one of {', '.join(opts)}")
            return default
        return str(v)

    def unknown(self, d: dict[str, Any], allowed: set[str], prefix: str) -> None:
        for k in d:
            if k not in allowed:
                self.err(f"{prefix}{k}", "unknown field")


def _parse_arch(v: _V, d: Any) -> tuple[Architecture | None, int]:
    p = "model.architecture"
    if not isinstance(d, dict):
        v.err(p, "must be an object")
        return None, 0
    v.unknown(d, ARCH_KEYS, p + ".")
    big = 1 << 22
    vocab = v.int_(d, "vocab_size", p + ".vocab_size", lo=2, hi=big, required=True)
    h = v.int_(d, "hidden_size", p + ".hidden_size", lo=8, hi=1 << 17, required=True)
    ffn = v.int_(d, "intermediate_size", p + ".intermediate_size", lo=1, hi=1 << 19, required=True)
    layers = v.int_(d, "num_layers", p + ".num_layers", lo=1, hi=1024, required=True)
    heads = v.int_(
        d, "num_attention_heads", p + ".num_attention_heads", lo=1, hi=4096, required=True
    )
    kv = v.int_(d, "num_kv_heads", p + ".num_kv_heads", lo=1, hi=4096, default=heads)
    head_dim = v.int_(d, "head_dim", p + ".head_dim", lo=1, hi=4096)
    norms = v.int_(d, "norms_per_layer", p + ".norms_per_layer", lo=0, hi=8, default=2)
    max_seq = v.int_(
        d, "max_seq_len", p + ".max_seq_len", lo=1, hi=MAX_CUSTOM_SEQ, default=MAX_CUSTOM_SEQ
    )
    if heads and kv and heads % kv:
        v.err(p + ".num_kv_heads", "must divide num_attention_heads")
    moe = None
    if d.get("moe") is not None:
        m = d["moe"]
        mp = p + ".moe"
        if not isinstance(m, dict):
            v.err(mp, "must be an object")
        else:
            v.unknown(m, MOE_KEYS, mp + ".")
            ne = v.int_(m, "num_experts", mp + ".num_experts", lo=1, hi=4096, required=True)
            k = v.int_(
                m, "experts_per_token", mp + ".experts_per_token", lo=1, hi=4096, required=True
            )
            ef = v.int_(
                m,
                "expert_intermediate_size",
                mp + ".expert_intermediate_size",
                lo=1,
                hi=1 << 19,
                required=True,
            )
            sh = v.int_(m, "shared_experts", mp + ".shared_experts", lo=0, hi=64, default=0)
            dl = v.int_(m, "dense_layers", mp + ".dense_layers", lo=0, hi=1024, default=0)
            if ne and k and k > ne:
                v.err(mp + ".experts_per_token", "must not exceed num_experts")
            if layers and dl is not None and dl >= layers:
                v.err(mp + ".dense_layers", "must be fewer than num_layers")
            if ne and k and ef and sh is not None and dl is not None:
                moe = MoE(ne, k, ef, sh, dl)
    mla = None
    if d.get("mla") is not None:
        m = d["mla"]
        mp = p + ".mla"
        if not isinstance(m, dict):
            v.err(mp, "must be an object")
        else:
            v.unknown(m, MLA_KEYS, mp + ".")
            vals = [
                v.int_(
                    m,
                    k,
                    f"{mp}.{k}",
                    lo=0 if k == "q_lora_rank" else 1,
                    hi=1 << 16,
                    required=k != "q_lora_rank",
                    default=0,
                )
                for k in (
                    "q_lora_rank",
                    "kv_lora_rank",
                    "qk_nope_head_dim",
                    "qk_rope_head_dim",
                    "v_head_dim",
                )
            ]
            if all(x is not None for x in vals):
                q, kvr, nope, rope, vd = (int(x or 0) for x in vals)
                mla = MLA(q, kvr, nope, rope, vd)
    if None in (vocab, h, ffn, layers, heads, kv, norms) or v.errors:
        return None, 0
    assert vocab and h and ffn and layers and heads and kv and norms is not None
    arch = Architecture(
        vocab_size=vocab,
        hidden_size=h,
        intermediate_size=ffn,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim or max(1, h // heads),
        tie_embeddings=v.bool_(d, "tie_embeddings", p + ".tie_embeddings", False),
        qkv_bias=v.bool_(d, "qkv_bias", p + ".qkv_bias", False),
        qk_norm=v.bool_(d, "qk_norm", p + ".qk_norm", False),
        norms_per_layer=norms,
        gated_mlp=v.bool_(d, "gated_mlp", p + ".gated_mlp", True),
        moe=moe,
        mla=mla,
    )
    return arch, max_seq or MAX_CUSTOM_SEQ


def _scaled(c: ParamCounts, target: int) -> ParamCounts:
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


def parse(req: Any) -> Request:
    v = _V()
    if not isinstance(req, dict):
        raise SizingError("request", "must be a JSON object")
    v.unknown(req, REQUEST_KEYS, "")
    model = req.get("model")
    arch: Architecture | None = None
    counts: ParamCounts | None = None
    max_seq = MAX_CUSTOM_SEQ
    source = ""
    derived = False
    if not isinstance(model, dict):
        v.err("model", 'is required: {"preset": id} | {"params": n} | {"architecture": {...}}')
    else:
        keys = [k for k in ("preset", "params", "architecture") if k in model]
        v.unknown(model, {"preset", "params", "architecture"}, "model.")
        if len(keys) != 1:
            v.err("model", "give exactly one of preset, params, architecture")
        elif keys[0] == "preset":
            pid = model["preset"]
            if not isinstance(pid, str) or pid not in PRESETS:
                v.err("model.preset", f"unknown preset {pid!r}; see list_presets()")
            else:
                pr = PRESETS[pid]
                arch, counts, max_seq, source = pr.arch, count(pr.arch), pr.max_seq_len, pid
        elif keys[0] == "params":
            n = v.num(model, "params", "model.params", lo=1e6, hi=MAX_PARAMS, lo_open=False)
            if n is not None:
                arch = derive_architecture(n)
                counts = _scaled(count(arch), int(n))
                source, derived = "params", True
        else:
            arch, max_seq = _parse_arch(v, model["architecture"])
            if arch is not None:
                counts = count(arch)
                source = "architecture"
    method = v.choice(req, "method", "method", "full")
    tokens = v.num(req, "tokens", "tokens", lo=0, hi=MAX_TOKENS, required=True)
    seq = v.int_(req, "seq_len", "seq_len", lo=16, hi=MAX_CUSTOM_SEQ, default=4096) or 4096
    if arch is not None and seq > max_seq:
        v.err("seq_len", f"{seq} is longer than this model supports ({max_seq})")
    mbs = v.int_(req, "micro_batch_size", "micro_batch_size", lo=1, hi=1024, default=1) or 1
    precision = v.choice(req, "precision", "precision", "bf16")
    optimizer = v.choice(req, "optimizer", "optimizer", "adamw")
    grad_dtype = v.choice(req, "grad_dtype", "grad_dtype", "bf16")
    v.choice(req, "recompute", "recompute", "none")
    flash = v.bool_(req, "flash_attention", "flash_attention", True)
    master = v.bool_(req, "master_weights", "master_weights", True)
    v.bool_(req, "offload_optimizer", "offload_optimizer", False)
    off_par = v.bool_(req, "offload_params", "offload_params", False)
    att = v.bool_(req, "attention_flops", "attention_flops", False)
    lora_rank = v.int_(req, "lora_rank", "lora_rank", lo=1, hi=4096, default=16) or 16
    token_bytes = v.int_(req, "token_bytes", "token_bytes", lo=1, hi=8)
    mfu = v.num(req, "mfu", "mfu", lo=0, hi=1)
    max_days = v.num(req, "max_days", "max_days", lo=0, hi=3650)
    rocm_ok = v.bool_(req, "rocm_ok", "rocm_ok", False)
    nodes = v.int_(req, "nodes", "nodes", lo=1, hi=MAX_NODES)
    sku = req.get("sku")
    ids = [s.id for s in all_specs()]
    if sku is not None and sku not in ids:
        v.err("sku", f"unknown SKU {sku!r}; one of {', '.join(ids)}")
        sku = None
    par_raw = req.get("parallelism", "auto")
    par: dict[str, Any] | None = None
    if par_raw is not None and par_raw != "auto":
        if not isinstance(par_raw, dict):
            v.err("parallelism", 'must be "auto" or an object')
        else:
            v.unknown(par_raw, PAR_KEYS, "parallelism.")
            sh = par_raw.get("sharding", "zero3")
            if sh not in ("ddp", "zero1", "zero2", "zero3"):
                v.err("parallelism.sharding", "must be one of ddp, zero1, zero2, zero3")
            par = {"sharding": sh}
            for k in ("shard_group", "tp", "pp", "ep", "cp"):
                par[k] = v.int_(par_raw, k, f"parallelism.{k}", lo=1, hi=MAX_NODES * 72)
            if arch is not None:
                if par["pp"] and par["pp"] > arch.num_layers:
                    v.err("parallelism.pp", "must not exceed the number of layers")
                if par["tp"] and arch.num_attention_heads % par["tp"]:
                    v.err("parallelism.tp", "must divide the number of attention heads")
                if par["ep"] and par["ep"] > 1:
                    if arch.moe is None:
                        v.err("parallelism.ep", "expert parallel needs a mixture-of-experts model")
                    elif arch.moe.num_experts % par["ep"]:
                        v.err("parallelism.ep", "must divide the number of experts")
    if off_par and par is not None and par.get("sharding") != "zero3":
        v.err("offload_params", "parameter offload needs ZeRO-3/FSDP sharding")
    if method != "full" and precision in ("fp8", "fp4"):
        v.err("precision", f"{precision} is modelled for full training only")
    if precision == "fp4" and sku is not None and not spec(sku).fp4_dense_tflops:
        with_fp4 = ", ".join(s.id for s in all_specs() if s.fp4_dense_tflops)
        v.err(
            "precision",
            f"fp4 (NVFP4/MXFP4 training) needs FP4 tensor cores; {sku} has no FP4 dense peak "
            f"(SKUs with one: {with_fp4})",
        )
    if v.errors:
        raise SizingError.many(v.errors)
    assert arch is not None and counts is not None and tokens is not None
    job = Job(
        arch=arch,
        counts=counts,
        method=method,
        seq_len=seq,
        precision=precision,
        optimizer=optimizer,
        grad_dtype=grad_dtype,
        master_weights=master,
        flash_attention=flash,
        lora_rank=lora_rank,
    )
    fixed = {
        k: req[k]
        for k in ("micro_batch_size", "recompute", "offload_optimizer")
        if req.get(k) is not None
    }
    fixed["offload_params"] = off_par
    fixed.setdefault("micro_batch_size", mbs)
    return Request(
        job,
        source,
        derived,
        tokens,
        mfu,
        sku,
        nodes,
        par,
        fixed,
        att,
        token_bytes,
        max_days,
        rocm_ok,
    )


# --- evaluation -----------------------------------------------------------------------------


def _price_cents(spec: NodeSpec, prices: dict[str, int] | None) -> int:
    """Price of one unit (an 8-GPU node, or a whole rack for per-GPU-priced racks)."""
    p = spec.list_price_cents_month
    if prices and spec.id in prices:
        p = int(prices[spec.id])
    return p * spec.gpus_per_node if spec.price_per_gpu else p


def _peak(spec: NodeSpec, precision: str) -> float:
    return compute.peak_tflops(spec, precision)


def _explicit_layout(r: Request, spec: NodeSpec) -> tuple[Layout | None, int, str]:
    assert r.parallelism is not None
    p = r.parallelism
    g = spec.gpus_per_node
    tp, pp, ep, cp = (int(p.get(k) or 1) for k in ("tp", "pp", "ep", "cp"))
    block = tp * pp * cp
    if r.nodes is not None:
        n = r.nodes
    else:
        need = max(block * ep, block * (p.get("shard_group") or 1))
        n = max(1, math.ceil(need / g))
        while (n * g) % block and n < MAX_NODES:
            n += 1
    w = n * g
    if w % block:
        return None, n, f"tp·pp·cp = {block} does not divide {w} GPUs"
    dp = w // block
    sg = int(p.get("shard_group") or (1 if p["sharding"] == "ddp" else dp))
    if dp % sg:
        return None, n, f"shard_group {sg} does not divide the data-parallel size {dp}"
    if dp % ep:
        return None, n, f"ep {ep} does not divide the data-parallel size {dp}"
    lay = Layout(
        sharding=p["sharding"],
        shard_group=sg,
        tp=tp,
        pp=pp,
        ep=ep,
        cp=cp,
        micro_batch_size=int(r.fixed["micro_batch_size"]),
        recompute=str(r.fixed.get("recompute", "none")),
        offload_optimizer=bool(r.fixed.get("offload_optimizer", False)),
        offload_params=bool(r.fixed.get("offload_params", False)),
        world=w,
    )
    return lay, n, ""


def _option(
    r: Request, spec: NodeSpec, flops: float, prices: dict[str, int] | None
) -> dict[str, Any]:
    g = spec.gpus_per_node
    usable = spec.usable_gpu_memory_bytes
    host = spec.node_ram_bytes
    if r.job.precision == "fp4" and not spec.fp4_dense_tflops:
        return _unfit_option(
            spec, 1, usable, 0.0, [f"{spec.name} has no FP4 tensor cores: fp4 cannot run here"]
        )
    # A request's mfu overrides the time model; otherwise every layout's efficiency *is* the
    # throughput model's predicted MFU (base 1.0), so hours = FLOPs / (GPUs · peak · MFU).
    modelled = r.mfu is None
    mfu = r.mfu if r.mfu is not None else 1.0
    peak = _peak(spec, r.job.precision)
    price = _price_cents(spec, prices)
    min_months = int(spec.raw.get("min_term_months") or 1)
    notes: list[str] = []
    one_node_hours = compute.training_seconds(flops, g, peak, mfu) / 3600
    predicted: dict[Layout, tuple[float, float]] = {}

    def _by_efficiency(c: layout.Candidate) -> tuple[float, int]:
        return (-round(c.efficiency, 6), c.rank)

    def _modelled(c: layout.Candidate) -> layout.Candidate:
        """The candidate with its efficiency from the throughput model (unless mfu pinned)."""
        if not modelled:
            return c
        if c.layout not in predicted:
            m, tp = compute.predicted_mfu(
                r.job, c.layout, spec, attention_counted=r.attention_flops
            )
            predicted[c.layout] = (m, tp.tokens_per_s_per_gpu)
        return layout.Candidate(c.layout, c.memory, predicted[c.layout][0], c.label, c.rank)

    def months_cost(n: int, eff: float) -> tuple[float, int, int]:
        hours = one_node_hours / n / eff
        months = compute.rental_months(hours, min_months=min_months)
        return hours, months, months * n * price

    chosen: layout.Candidate | None = None
    runner: layout.Candidate | None = None
    n_best = 1
    if r.parallelism is not None:
        lay, n_best, why = _explicit_layout(r, spec)
        if lay is None:
            return _unfit_option(spec, n_best, usable, mfu, [why])
        mem = memory(r.job, lay)
        chosen = _modelled(layout.Candidate(lay, mem, layout.efficiency(lay, g), "your layout", 0))
        fit = layout.fits(mem, usable, host, g)
    else:
        mbs0 = int(r.fixed["micro_batch_size"])
        mbs_opts = [mbs0]
        rc_opts = (
            [r.fixed["recompute"]] if "recompute" in r.fixed else ["none", "selective", "full"]
        )
        off_opts = (
            [bool(r.fixed["offload_optimizer"])]
            if "offload_optimizer" in r.fixed
            else [False, True]
        )
        if r.nodes is not None:
            ns = [r.nodes]
        else:
            # lower bound: even fully sharded, weights + gradients (4 B/param) stay on GPU
            n_min = (
                math.ceil(4.0 * r.job.counts.total / (g * usable)) if r.job.method == "full" else 1
            )
            if r.max_days:
                # a deadline: at least the nodes that could finish in time at full efficiency
                e_top = 1.0
                if modelled:  # the model's MFU for a one-node sharded layout, as the guess
                    ref = layout.make_layout(
                        layout.Shape("zero3", g, 1, 1, 1, 1, ""),
                        world=g,
                        mbs=mbs0,
                        recompute="none",
                        offload_opt=False,
                        offload_params=False,
                    )
                    e_top = compute.predicted_mfu(
                        r.job, ref, spec, attention_counted=r.attention_flops
                    )[0]
                n_min = max(n_min, math.ceil(one_node_hours / (r.max_days * 24 * e_top)))
            ns = [n for n in layout.node_candidates() if n >= n_min] or [MAX_NODES]

        def best(n: int, want: int = 1) -> list[layout.Candidate]:
            if not modelled:
                return _best(n, want)
            # the heuristic order proposes, the throughput model picks among the first few
            extra = 2 if r.job.arch.moe is not None else 0  # MoE: EP or not matters most
            found = sorted((_modelled(c) for c in _best(n, want + extra)), key=_by_efficiency)
            return found[:want]

        def _best(n: int, want: int = 1) -> list[layout.Candidate]:
            return layout.best_layouts(
                r.job,
                nodes=n,
                g=g,
                usable=usable,
                host_ram=host,
                mbs_options=mbs_opts,
                recompute_options=rc_opts,
                offload_options=off_opts,
                want=want,
            )

        def any_fit(n: int) -> bool:
            return layout.any_fits(
                r.job,
                nodes=n,
                g=g,
                usable=usable,
                host_ram=host,
                mbs_options=mbs_opts,
                recompute_options=rc_opts,
                offload_options=off_opts,
            )

        first = best(ns[0])
        if not first and len(ns) > 1:
            # memory per GPU only falls as nodes are added: binary-search the first count
            # that fits, then price from there
            lo, hi = 1, len(ns) - 1
            if any_fit(ns[hi]):
                while lo < hi:
                    mid = (lo + hi) // 2
                    if any_fit(ns[mid]):
                        hi = mid
                    else:
                        lo = mid + 1
                # refine between the last count that did not fit and the first that did
                a_, b_ = ns[lo - 1] + 1, ns[lo]
                while a_ < b_:
                    mid = (a_ + b_) // 2
                    if any_fit(mid):
                        b_ = mid
                    else:
                        a_ = mid + 1
                ns = [a_, *ns[lo:]]
                first = best(ns[0])
        if first and r.max_days and modelled and r.nodes is None:
            # the predicted MFU falls as nodes are added: step up until the deadline holds
            for _ in range(4):
                need = math.ceil(one_node_hours / (r.max_days * 24 * first[0].efficiency))
                if need <= ns[0] or need > MAX_NODES:
                    break
                more = best(need)
                if not more:
                    break
                ns, first = [need, *[n for n in ns if n > need]], more
        if first:
            n0 = ns[0]
            chosen, n_best = first[0], n0
            hours0, m0, best_cost = months_cost(n0, chosen.efficiency)
            best_key = (best_cost, hours0)
            # more nodes only pay off where whole-month rounding drops a month: for each
            # month count m the smallest node count finishing within m months at each
            # efficiency seen so far, tried in order of their cost at the first layout's
            # efficiency; skipped when even efficiency 1 could not beat the best so far.
            if r.nodes is None:
                m_max = min(m0 - 1, 36)
                heap: list[tuple[int, int, int]] = []
                e_guess = chosen.efficiency
                seen_n = {n0}
                effs: set[float] = set()

                def push(e: float) -> None:
                    effs.add(e)
                    for m in range(1, m_max + 1):
                        n = math.ceil(one_node_hours / (compute.HOURS_PER_MONTH * m * e))
                        if n not in seen_n and n0 < n <= MAX_NODES:
                            seen_n.add(n)
                            heapq.heappush(
                                heap, (months_cost(n, e_guess)[2], months_cost(n, 1.0)[2], n)
                            )

                push(chosen.efficiency)
                push(1.0)
                budget = SEARCH_BUDGET
                while heap:
                    _guess, bound, n = heapq.heappop(heap)
                    if bound > best_cost * (1 + COST_TIE):
                        continue
                    if budget <= 0:
                        notes.append("node-count search stopped at its evaluation budget")
                        break
                    budget -= 1
                    found = best(n)
                    if not found:
                        continue
                    e = found[0].efficiency
                    if all(abs(e - x) > 0.03 * x for x in effs):  # modelled MFUs vary a little
                        push(e)
                    hours, _m, cost = months_cost(n, e)
                    if _better(cost, hours, best_key):
                        best_key, best_cost, n_best, chosen = (cost, hours), cost, n, found[0]
            both = best(n_best, want=2)
            if len(both) > 1:
                runner = both[1]
        if chosen is None:
            # nothing fits: report the most-sharded layout at the largest count we priced
            n = ns[-1]
            sh = layout.shapes(r.job, n, g)
            lays = [
                layout.make_layout(
                    s,
                    world=n * g,
                    mbs=mbs0,
                    recompute=rc_opts[-1],
                    offload_opt=off_opts[-1],
                    offload_params=False,
                )
                for s in sh
            ]
            mems = [(memory(r.job, lay), lay) for lay in lays]
            mem, lay = min(mems, key=lambda x: x[0].total)
            chosen = _modelled(layout.Candidate(lay, mem, layout.efficiency(lay, g), "closest", 0))
            n_best = n
            fit = False
            notes.append(f"no layout fits on up to {n} nodes")
        else:
            fit = True
    lay, mem = chosen.layout, chosen.memory
    n = n_best
    eff = chosen.efficiency
    hours, months, cost = months_cost(n, eff)
    gpus = n * g
    limit = int(usable * (1 - SAFETY_MARGIN))
    hourly = spec.hourly_elsewhere_cents_per_gpu_hour
    alt_cents = math.ceil(gpus * hours * hourly)
    eff_rate = cost / (gpus * hours) if hours > 0 else float(price) / g / compute.HOURS_PER_MONTH
    opt: dict[str, Any] = {
        "sku": spec.id,
        "name": spec.name,
        "self_serve": spec.self_serve,
        "talk_to_sales": not spec.self_serve,
        "nodes": n,
        "gpus": gpus,
        "fits": fit,
        "layout": lay.as_dict(),
        "layout_description": chosen.label,
        "memory_per_gpu_bytes": mem.as_dict(),
        "overhead_breakdown_bytes": mem.overhead_breakdown(),
        "usable_gpu_memory_bytes": usable,
        "memory_limit_bytes": limit,
        "headroom_bytes": max(0, limit - mem.total),
        "shortfall_bytes": max(0, mem.total - limit),
        "host_offload_bytes_per_node": mem.cpu_offload_per_gpu * g,
        "node_ram_bytes": host,
        "training_days": round(hours / 24, 2),
        "mfu": round(mfu * eff, 4) if modelled else mfu,
        "mfu_source": "throughput model (app/sizing/throughput.py, docs/sizing-accuracy.md)"
        if modelled
        else spec.mfu_source,
        "mfu_model": "throughput" if modelled else "request",
        "layout_efficiency": 1.0 if modelled else round(eff, 4),
        "effective_mfu": round(mfu * eff, 4),
        "peak_tflops_per_gpu": peak,
        "months": months,
        "unit_price_usd_month": compute.cents_to_usd(price),
        "rental_cost_usd": compute.cents_to_usd(cost),
        "effective_usd_per_gpu_hour": compute.cents_to_usd(eff_rate),
        "usd_per_gpu_hour_24_7": compute.cents_to_usd(price / (g * compute.HOURS_PER_MONTH)),
        "hourly_alternative_usd": compute.cents_to_usd(alt_cents),
        "hourly_elsewhere_usd_per_gpu_hour": compute.cents_to_usd(hourly),
        "break_even_utilisation": round(compute.break_even_utilisation(price, g, hourly), 4),
        "utilisation_of_rented_time": round(
            min(1.0, hours / (months * compute.HOURS_PER_MONTH)), 4
        ),
        "notes": notes,
    }
    if modelled and lay in predicted:
        opt["predicted_tokens_per_s_per_gpu"] = round(predicted[lay][1], 1)
    if runner is not None:
        opt["runner_up"] = {
            "layout": runner.layout.as_dict(),
            "description": runner.label,
            "memory_total_bytes": runner.memory.total,
            "layout_efficiency": round(runner.efficiency, 4),
        }
    if r.max_days and hours > r.max_days * 24 * 1.0001:
        notes.append(
            f"misses your {r.max_days:g}-day target ({hours / 24:.1f} days): more nodes would be "
            "needed than scale efficiently, or memory limits the layout"
        )
    opt["meets_deadline"] = (hours <= r.max_days * 24 * 1.0001) if r.max_days else None
    if spec.self_serve and n > SELF_SERVE_MAX_NODES:
        opt["talk_to_sales"] = True
        notes.append(
            f"{n} nodes is more than the {SELF_SERVE_MAX_NODES} we sell self-serve: talk to sales "
            "for a cluster (private network, delivery plan)"
        )
    if not spec.self_serve:
        notes.append(
            f"{spec.name}: {min_months}-{spec.raw.get('max_term_months')} month terms, "
            "priced per GPU; talk to sales (not a self-serve checkout)"
        )
    if fit:
        notes.append(
            f"fits with {(limit - mem.total) / 1e9:.1f} GB headroom per GPU below "
            f"{(1 - SAFETY_MARGIN) * 100:.0f} % of the usable "
            f"{usable / 1024**3:.1f} GiB"
        )
    else:
        notes.append(f"needs {mem.total / 1e9:.1f} GB per GPU, limit {limit / 1e9:.1f} GB")
        if (
            mem.cpu_offload_per_gpu
            and host is not None
            and mem.cpu_offload_per_gpu * g > host * 0.9
        ):
            notes.append("offloaded optimizer state exceeds the node's RAM")
    if alt_cents < cost:
        notes.append(
            "paying per GPU-hour elsewhere would be cheaper for this run "
            f"(US${alt_cents / 100:,.0f} vs US${cost / 100:,.0f})"
        )
    if hours > 365 * 24:
        notes.append(
            f"takes {hours / 24 / 365:.1f} years on {n} node(s): the cheapest count by whole "
            "months; more nodes cost about the same and finish sooner"
        )
    if lay.offload_optimizer:
        notes.append("optimizer state offloaded to CPU RAM: slower steps")
    if lay.recompute == "full":
        notes.append("full activation recomputation: about one extra forward pass per step")
    return opt


def _unfit_option(
    spec: NodeSpec, n: int, usable: int, mfu: float, notes: list[str]
) -> dict[str, Any]:
    return {
        "sku": spec.id,
        "name": spec.name,
        "self_serve": spec.self_serve,
        "talk_to_sales": not spec.self_serve,
        "nodes": n,
        "gpus": n * spec.gpus_per_node,
        "fits": False,
        "layout": None,
        "memory_per_gpu_bytes": None,
        "usable_gpu_memory_bytes": usable,
        "training_days": None,
        "mfu": mfu,
        "months": None,
        "rental_cost_usd": None,
        "effective_usd_per_gpu_hour": None,
        "hourly_alternative_usd": None,
        "notes": notes,
    }


def _single_gpu(r: Request, flops: float) -> tuple[bool, str]:
    if r.job.method in ("lora", "qlora"):
        return True, f"{r.job.method.upper()} adapter training"
    h100 = next((s for s in all_specs() if s.id == "hgx-h100"), None)
    if h100 is None:
        return False, ""
    for rc in ("none", "selective", "full"):
        lay = Layout("ddp", 1, 1, 1, 1, 1, int(r.fixed["micro_batch_size"]), rc, False, False, 1)
        mem = memory(r.job, lay)
        if mem.total <= h100.usable_gpu_memory_bytes * (1 - SAFETY_MARGIN):
            days = (
                compute.training_seconds(
                    flops, 1, _peak(h100, r.job.precision), r.mfu or h100.default_mfu
                )
                / 86400
            )
            if days <= SINGLE_GPU_MAX_DAYS:
                return True, (f"the job fits one 80 GB GPU and takes about {days:.1f} days there")
            return False, ""
    return False, ""


def _assumptions(r: Request) -> list[str]:
    j = r.job
    out = [
        f"usable GPU memory is the catalog's driver-reported figure; fit decisions keep "
        f"{SAFETY_MARGIN * 100:.0f} % of it free (headroom is reported below that line)",
        "model states: BF16 weights 2 B/param"
        + (" (+1 B FP8 weight copy, Transformer Engine style)" if j.precision == "fp8" else "")
        + f", gradients {4 if j.grad_dtype == 'fp32' else 2} B"
        + (", FP32 master 4 B" if j.master_weights else ", no FP32 master copy (pure BF16)")
        + (
            ", 8-bit Adam 2 B"
            if j.optimizer == "adamw8bit"
            else f", Adam moments {8 if j.master_weights else 4} B"
        ),
        "ZeRO-1 shards optimizer+master, ZeRO-2 also gradients, ZeRO-3/FSDP also weights, over "
        "the shard group; TP/PP/EP divide what each rank holds; sequence parallel with TP",
        "activations per layer from the real dimensions (16-bit, dropout-free pre-norm blocks, "
        "gated MLP, GQA); selective recompute drops attention scores and the MLP activation "
        "output; full keeps only each layer's input; 1F1B pipeline keeps pp micro-batches in "
        "flight on the first stage",
        f"logits + cross-entropy buffer {CE_BYTES_PER_LOGIT} B per logit on the last stage "
        "(an unfused FP32 loss can need ~10 B)",
        f"framework overhead: CUDA context {CUDA_CONTEXT_BYTES / 2**30:.2f} GiB + NCCL "
        f"{NCCL_BYTES_PER_GROUP / 2**30:.2f} GiB per parallel group in use + ZeRO-3 gather "
        f"buffers (2 prefetched units + 1 gradient unit) + {FRAGMENTATION * 100:.0f} % allocator "
        "fragmentation on activations and buffers",
        "training FLOPs = 6 x active params x tokens"
        + (
            " + 12·L·h·s·tokens attention term"
            if r.attention_flops
            else " (attention term reported separately, not added)"
        )
        + (
            "; time = FLOPs / (GPUs x dense peak x MFU x layout efficiency)"
            if r.mfu is not None
            else "; time = FLOPs / (GPUs x dense peak of the precision x MFU), the MFU "
            "predicted per layout by the throughput model (GEMM efficiency by size and "
            "precision, attention, HBM-bound work, TP/CP/EP/DP traffic over NVLink and the "
            "network, pipeline bubble; docs/sizing-accuracy.md)"
        ),
        "layout efficiency (ours, heuristic): full recompute 0.75, selective 0.97, TP8 0.90, "
        "PP 0.92, FSDP across nodes 0.90, EP 0.95, CP 0.95, optimizer offload 0.70"
        + ("" if r.mfu is not None else " (orders the layouts tried; time is the model's)"),
        "a month is 730 hours; each node is rented in whole months; money is computed in cents",
        "checkpoint with optimizer state ≈ 14 B/param (range 12–16); dataset stored as "
        "token IDs (2 B if the vocabulary fits 16 bits, else 4 B), copied to each node; "
        "checkpoints written sharded across nodes",
    ]
    if r.derived:
        a = j.arch
        out.append(
            f"architecture derived from the parameter count (Llama-3-style: {a.num_layers} "
            f"layers, hidden {a.hidden_size}, FFN {a.intermediate_size}, vocab "
            f"{a.vocab_size}); give a preset or architecture for exact activations"
        )
    if j.method != "full":
        out.append(
            f"{j.method}: base weights frozen ({'4-bit NF4' if j.method == 'qlora' else 'BF16'})"
            f", rank-{j.lora_rank} adapters on every attention and MLP projection; "
            "FLOPs 4·N·T (no weight gradients)"
        )
    if r.parallelism is None:
        out.append(
            "layout searched: pinned fields (recompute, offload_optimizer, micro_batch_size"
            ") are kept as given; the rest is chosen for the lowest rental cost, then "
            "the shortest time"
        )
    return out


def _better(cost: float, hours: float, best: tuple[float, float]) -> bool:
    """Cheaper by more than the tie margin, or about as cheap and faster."""
    best_cost, best_hours = best
    if cost < best_cost * (1 - COST_TIE):
        return True
    return cost <= best_cost * (1 + COST_TIE) and hours < best_hours


def _rank(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cheapest first; options within the tie margin of the cheapest are ordered by speed."""
    by_cost = sorted(options, key=lambda o: (o["rental_cost_usd"], o["training_days"]))
    floor = by_cost[0]["rental_cost_usd"] * (1 + COST_TIE)
    near = sorted(
        (o for o in by_cost if o["rental_cost_usd"] <= floor), key=lambda o: o["training_days"]
    )
    return near + [o for o in by_cost if o["rental_cost_usd"] > floor]


def size(request: dict[str, Any], *, prices: dict[str, int] | None = None) -> dict[str, Any]:
    """Size a training job on every SKU (or the one asked for). Raises SizingError."""
    r = parse(request)
    j = r.job
    c = j.counts
    flops = compute.training_flops(c.active, r.tokens, method=j.method)
    att = compute.attention_flops(j.arch, j.seq_len, r.tokens)
    if r.attention_flops:
        flops += att
    w_b = 2.0
    opt_b = 2.0 if j.optimizer == "adamw8bit" else (8.0 if j.master_weights else 4.0)
    ckpt_bpp = w_b + (4.0 if j.master_weights else 0.0) + opt_b
    if j.method == "full":
        ckpt = compute.checkpoint_bytes(c.total, ckpt_bpp)
    else:
        ckpt = compute.checkpoint_bytes(j.lora_params, 2.0 + 4.0 + opt_b)
    data = compute.dataset_bytes(r.tokens, j.arch.vocab_size, r.token_bytes)
    specs = [s for s in all_specs() if r.sku is None or s.id == r.sku]
    options = [_option(r, s, flops, prices) for s in specs]
    warnings: list[str] = []
    for o in options:
        spec = next(s for s in specs if s.id == o["sku"])
        o["storage"] = compute.storage(
            checkpoint=ckpt,
            dataset=data,
            nodes=o["nodes"],
            nvme_bytes_per_node=spec.nvme_bytes,
            egress_tb_month_per_node=spec.egress_tb_month,
        )
        st = o["storage"]
        if st.get("dataset_fits_nvme") is False:
            o["notes"].append("the tokenized dataset does not fit the node's NVMe; stream it")
        elif st.get("checkpoints_fit_on_nvme") == 0 and spec.nvme_bytes is not None:
            o["notes"].append("no full checkpoint fits on NVMe beside the dataset")
    single, single_why = _single_gpu(r, flops)
    fitting = [o for o in options if o["fits"]]
    # Recommend what a customer can check out: self-serve, within the self-serve node count,
    # meeting the deadline if one was given, and AMD only when the stack already runs on ROCm.
    tiers = [
        [
            o
            for o in fitting
            if not o["talk_to_sales"]
            and (r.rocm_ok or o["sku"] != "mi355x")
            and o.get("meets_deadline") is not False
        ],
        [o for o in fitting if not o["talk_to_sales"] and (r.rocm_ok or o["sku"] != "mi355x")],
        [o for o in fitting if o["self_serve"]],
        fitting,
    ]
    pool = next((t for t in tiers if t), [])

    rec: dict[str, Any]
    if pool:
        pool = _rank(pool)
        best = pool[0]
        lay_txt = best.get("layout_description", "")
        reason = (
            f"{best['name']}: cheapest option that fits"
            f"{' your deadline' if r.max_days and best.get('meets_deadline') else ''} — "
            f"{best['nodes']} × "
            f"{best['name']} ({best['gpus']} GPUs), {lay_txt}; "
            f"{best['training_days']:.1f} days at {best['effective_mfu'] * 100:.0f} % "
            f"effective MFU, {best['months']} month(s) per node, "
            f"US${best['rental_cost_usd']:,.2f}."
        )
        if not best["self_serve"]:
            reason += " Nothing self-serve fits: this rack is a sales conversation."
        elif best["talk_to_sales"]:
            reason += (
                f" More than {SELF_SERVE_MAX_NODES} nodes: a cluster like this is arranged with"
                " sales."
            )
        amd = next((o for o in fitting if o["sku"] == "mi355x"), None)
        if (
            amd is not None
            and not r.rocm_ok
            and not amd["talk_to_sales"]
            and amd["rental_cost_usd"] < best["rental_cost_usd"]
        ):
            reason += (
                f" 8 × MI355X would cost US${amd['rental_cost_usd']:,.2f}, but only suits a"
                " training stack that already runs on ROCm (say so to include it)."
            )
        if r.max_days and best.get("meets_deadline") is False:
            reason += f" Nothing finishes within {r.max_days:g} days; this is the fastest we found."
        if "runner_up" in best:
            reason += f" Runner-up layout on the same node: {best['runner_up']['description']}."
        rec = {
            "sku": best["sku"],
            "nodes": best["nodes"],
            "reason": reason,
            "talk_to_sales": not best["self_serve"],
            "single_gpu_offer": single,
        }
        if len(pool) > 1:
            ru = pool[1]
            rec["runner_up"] = {
                "sku": ru["sku"],
                "nodes": ru["nodes"],
                "rental_cost_usd": ru["rental_cost_usd"],
                "training_days": ru["training_days"],
            }
            reason += (
                f" Next best: {ru['nodes']} × {ru['name']} at "
                f"US${ru['rental_cost_usd']:,.2f}, {ru['training_days']:.1f} days."
            )
            rec["reason"] = reason
        if best["hourly_alternative_usd"] < best["rental_cost_usd"]:
            warnings.append(
                "for this run, paying per GPU-hour elsewhere is cheaper than whole "
                "rented months; monthly pays off with more work queued on the node"
            )
    else:
        rec = {
            "sku": None,
            "nodes": None,
            "single_gpu_offer": single,
            "talk_to_sales": False,
            "reason": "No configuration fits within the searched node counts; reduce the "
            "sequence length or micro-batch, enable recomputation/offload, or use "
            "a smaller model.",
        }
    if single:
        rec["reason"] = (
            f"Consider a single-GPU fine-tuning offer instead ({single_why}); an "
            "8-GPU node is more than this job needs. " + rec["reason"]
        )
    if j.seq_len > 32768 and j.arch.vocab_size * j.seq_len > 4e9:
        warnings.append(
            "long context with a large vocabulary: the logits buffer is large; "
            "chunked cross-entropy helps"
        )
    if fitting and min(o["training_days"] for o in fitting) > 365:
        warnings.append("the shortest fitting run takes more than a year")
    if r.mfu is not None and r.mfu > 0.7:
        warnings.append(f"MFU {r.mfu:.2f} is above what public runs reach (≤ ~0.6)")
    return {
        "model": {
            "source": r.model_source,
            "derived_architecture": r.derived,
            "architecture": _arch_dict(j.arch),
        },
        "params": c.total,
        "active_params": c.active,
        "trainable_params": c.total if j.method == "full" else j.lora_params,
        "training_flops": flops,
        "attention_flops": att,
        "checkpoint_bytes": ckpt,
        "checkpoint_range_bytes": (
            [12 * c.total, 16 * c.total] if j.method == "full" else [ckpt, ckpt]
        ),
        "dataset_bytes": data,
        "options": options,
        "recommendation": rec,
        "single_gpu_offer": single,
        "assumptions": _assumptions(r),
        "warnings": warnings,
    }


def _arch_dict(a: Architecture) -> dict[str, Any]:
    d: dict[str, Any] = {
        "vocab_size": a.vocab_size,
        "hidden_size": a.hidden_size,
        "intermediate_size": a.intermediate_size,
        "num_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_kv_heads": a.num_kv_heads,
        "head_dim": a.head_dim,
        "tie_embeddings": a.tie_embeddings,
    }
    if a.moe is not None:
        d["moe"] = {
            "num_experts": a.moe.num_experts,
            "experts_per_token": a.moe.experts_per_token,
            "expert_intermediate_size": a.moe.expert_intermediate_size,
            "shared_experts": a.moe.shared_experts,
            "dense_layers": a.moe.dense_layers,
        }
    return d


def list_presets() -> list[dict[str, Any]]:
    out = []
    for p in PRESETS.values():
        c = count(p.arch)
        out.append(
            {
                "id": p.id,
                "name": p.name,
                "params": c.total,
                "active_params": c.active,
                "max_seq_len": p.max_seq_len,
                "moe": p.arch.moe is not None,
                "sources": dict(p.sources),
            }
        )
    return out


@lru_cache(maxsize=64)
def largest_full_training_model(sku_id: str, seq_len: int = 4096) -> dict[str, Any]:
    """Largest dense model trainable in full (BF16 + FP32 master + AdamW, FSDP over one node,
    micro-batch 1, full recompute allowed, no offload) at ``seq_len``."""
    spec = next((s for s in all_specs() if s.id == sku_id), None)
    if spec is None:
        raise SizingError("sku", f"unknown SKU {sku_id!r}")
    if not 16 <= seq_len <= MAX_CUSTOM_SEQ:
        raise SizingError("seq_len", f"must be between 16 and {MAX_CUSTOM_SEQ}")
    g = spec.gpus_per_node
    limit = spec.usable_gpu_memory_bytes * (1 - SAFETY_MARGIN)

    def job_for(arch: Architecture, counts: ParamCounts) -> Job:
        return Job(arch, counts, "full", seq_len, "bf16", "adamw", "bf16", True, True, 16)

    def fits_n(n: float) -> tuple[bool, Memory, str]:
        arch = derive_architecture(n)
        j = job_for(arch, _scaled(count(arch), int(n)))
        for rc in ("none", "selective", "full"):
            lay = Layout("zero3", g, 1, 1, 1, 1, 1, rc, False, False, g)
            m = memory(j, lay)
            if m.total <= limit:
                return True, m, rc
        return False, m, "full"

    lo, hi = 1e8, 5e12
    if not fits_n(lo)[0]:
        return {"sku": sku_id, "params": 0, "seq_len": seq_len, "largest_preset": None}
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if fits_n(mid)[0]:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.005:
            break
    ok, mem, rc = fits_n(lo)
    best_preset = None
    for p in sorted(PRESETS.values(), key=lambda p: count(p.arch).total):
        if p.arch.moe is not None or p.max_seq_len < seq_len:
            continue
        j = job_for(p.arch, count(p.arch))
        for rcp in ("none", "selective", "full"):
            if memory(j, Layout("zero3", g, 1, 1, 1, 1, 1, rcp, False, False, g)).total <= limit:
                best_preset = {
                    "id": p.id,
                    "name": p.name,
                    "params": count(p.arch).total,
                    "recompute": rcp,
                }
                break
    return {
        "sku": sku_id,
        "params": int(lo),
        "seq_len": seq_len,
        "layout": {
            "sharding": "zero3",
            "shard_group": g,
            "tp": 1,
            "pp": 1,
            "micro_batch_size": 1,
            "recompute": rc,
            "offload_optimizer": False,
        },
        "memory_per_gpu_bytes": mem.as_dict(),
        "usable_gpu_memory_bytes": spec.usable_gpu_memory_bytes,
        "largest_preset": best_preset,
        "assumptions": [
            "BF16 weights and gradients, FP32 master, AdamW; FSDP/ZeRO-3 over the "
            "node's GPUs; micro-batch 1; Llama-3-style architecture derived from "
            f"the parameter count; {SAFETY_MARGIN * 100:.0f} % safety margin"
        ],
    }
