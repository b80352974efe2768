"""Every sentence the engine says, as a code with parameters, and its catalogue.

The engine never builds prose directly: it returns :class:`Msg` objects (``code`` +
``params``) and renders them through :func:`render` in the request's language. The English
texts below are the msgids (marked with ``N_`` so Babel extracts them; the Chinese lives in
``translations/zh_CN/sizing.po``), so the web layer, the PDFs and the API all render the same
sentence from the same code, and ``tests/test_i18n.py`` sees every one.

Parameters stay machine-readable (numbers, ids). Conventions the renderer applies before
``%``-formatting: a parameter ending in ``_usd`` is a dollar amount (``US$1,234.56``); a
parameter whose value is itself a ``{"code", "params"}`` mapping (or a :class:`Msg`) is
rendered first, in the same language.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from app.errors import N_
from app.i18n import translations_for
from app.money import format_cents

Translate = Callable[[str], str]


@dataclass(frozen=True)
class Msg:
    """One sentence: a stable ``code`` and the ``params`` that fill it."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": {k: _plain(v) for k, v in self.params.items()}}


def _plain(v: Any) -> Any:
    if isinstance(v, Msg):
        return v.as_dict()
    if isinstance(v, tuple):
        return list(v)
    return v


CATALOG: dict[str, str] = {
    # --- validation errors (``code`` on each error) ---------------------------------------
    "request.not_object": N_("must be an object"),
    "request.not_json": N_("not valid JSON"),
    "request.invalid": N_("is not a valid value"),
    "request.required": N_("is required"),
    "request.unknown_field": N_("unknown field"),
    "request.more_errors": N_("and %(n)s more problems not listed"),
    "request.not_whole": N_("must be a whole number"),
    "request.not_number": N_("must be a finite number"),
    "request.not_bool": N_("must be true or false"),
    "request.bool_not_number": N_("must be a number, not true or false"),
    "request.string_not_number": N_("must be a JSON number, not text in quotes"),
    "request.not_text": N_("must be text"),
    "request.choice": N_("must be one of %(options)s"),
    "request.range": N_("must be between %(lo)s and %(hi)s, got %(got)s"),
    "request.range_open": N_("must be more than %(lo)s and at most %(hi)s, got %(got)s"),
    "request.model_required": N_(
        "is required: a preset, a parameter count or an architecture (give exactly one)"
    ),
    "request.model_one_of": N_("give exactly one of preset, params, architecture"),
    "request.unknown_preset": N_("unknown model preset %(preset)s"),
    "request.kv_heads_divide": N_("must divide the number of attention heads"),
    "request.experts_per_token": N_("must not exceed the number of experts"),
    "request.dense_layers": N_("must be fewer than the number of layers"),
    "request.unknown_sku": N_("unknown node %(sku)s; one of %(skus)s"),
    "request.pp_layers": N_("must not exceed the number of layers"),
    "request.tp_heads": N_("must divide the number of attention heads"),
    "request.tp_kv_heads": N_(
        "must divide the number of KV heads (no framework here replicates KV heads for training)"
    ),
    "request.ep_moe": N_("expert parallel needs a mixture-of-experts model"),
    "request.ep_experts": N_("must divide the number of experts"),
    "request.offload_params_zero3": N_("parameter offload needs ZeRO-3/FSDP sharding"),
    "request.fp8_full_only": N_("FP8 is modelled for full training only"),
    "request.fp4_full_only": N_("FP4 is modelled for full training only"),
    "request.fp4_no_peak": N_(
        "FP4 (NVFP4/MXFP4) training needs FP4 tensor cores; %(sku)s has none (nodes with "
        "FP4: %(skus)s)"
    ),
    "request.virtual_stages_interleaved": N_(
        "more than one virtual stage needs the interleaved pipeline schedule"
    ),
    "request.microbatches_one_of": N_("give num_microbatches or global_batch_size, not both"),
    # --- what a framework refuses to split (``app.sizing.splits``) -------------------------
    "split.tp_heads": N_("tensor parallel %(tp)s does not divide the %(heads)s attention heads"),
    "split.tp_kv_heads": N_(
        "tensor parallel %(tp)s does not divide the %(kv_heads)s KV heads (no framework here "
        "replicates KV heads for training)"
    ),
    "split.seq": N_(
        "sequence length %(seq_len)s is not a multiple of %(unit)s, which tensor parallel "
        "%(tp)s with sequence parallel and context parallel %(cp)s need"
    ),
    "split.pp_layers": N_("%(stages)s pipeline stages are more than the %(layers)s layers"),
    "split.interleaved_layers": N_(
        "%(layers)s layers do not split evenly over %(stages)s interleaved pipeline stages"
    ),
    "split.ep_dense": N_("expert parallel %(ep)s needs a mixture-of-experts model"),
    "split.ep_experts": N_("expert parallel %(ep)s does not divide the %(experts)s experts"),
    "note.layout_split": N_("this layout cannot run: %(why)s"),
    # --- layouts (``layout_description``) -------------------------------------------------
    "layout.hsdp": N_("FSDP/ZeRO-3 inside each node"),
    "layout.hsdp_nodes": N_("FSDP/ZeRO-3 inside each node, data parallel across nodes"),
    "layout.ddp": N_("plain data parallel (each GPU holds everything)"),
    "layout.zero1": N_("ZeRO-1 (optimizer state sharded over all GPUs)"),
    "layout.zero2": N_("ZeRO-2 (optimizer state and gradients sharded)"),
    "layout.zero3_all": N_("FSDP/ZeRO-3 across all nodes"),
    "layout.tp_zero1": N_("tensor parallel %(tp)s inside the node, ZeRO-1 data parallel"),
    "layout.tp_fsdp": N_("tensor parallel %(tp)s inside the node, FSDP across nodes"),
    "layout.tp_pp": N_("tensor parallel %(tp)s inside the node, pipeline parallel %(pp)s"),
    "layout.tp_pp_nodes": N_(
        "tensor parallel %(tp)s inside the node, pipeline parallel %(pp)s across nodes"
    ),
    "layout.tp_small_fsdp": N_("tensor parallel %(tp)s, FSDP over the rest"),
    "layout.ep_fsdp": N_("expert parallel %(ep)s inside the NVLink domain, FSDP over all"),
    "layout.ep_zero1": N_("expert parallel %(ep)s inside the NVLink domain, ZeRO-1"),
    "layout.ep_pp": N_("expert parallel %(ep)s inside the node, pipeline parallel %(pp)s"),
    "layout.tp_ep_pp": N_("tensor parallel %(tp)s + expert parallel %(ep)s, pipeline %(pp)s"),
    "layout.cp": N_("context parallel %(cp)s (long sequence), FSDP over the rest"),
    "layout.yours": N_("your layout"),
    "layout.closest": N_("the closest layout we found"),
    # the engineers' notes: a layout and the collective its nodes run ("all-reduce")
    "comm.with_collective": N_("%(layout)s (%(collective)s)"),
    # --- option notes (``note_codes``) -----------------------------------------------------
    "note.layout_block": N_("TP × PP × CP = %(block)s does not divide %(gpus)s GPUs"),
    "note.shard_group_dp": N_(
        "shard group %(shard_group)s does not divide the data-parallel size %(dp)s"
    ),
    "note.ep_dp": N_("expert parallel %(ep)s does not divide the data-parallel size %(dp)s"),
    "note.search_budget": N_("node-count search stopped at its evaluation budget"),
    "note.no_fit": N_("no layout fits on up to %(nodes_text)s"),
    "note.no_fp4": N_("%(name)s has no FP4 tensor cores: FP4 training cannot run on it"),
    "note.framework_layout": N_(
        "%(framework)s cannot run this layout: the stack offers no tensor, pipeline, context "
        "or expert parallelism of this kind"
    ),
    "note.slow_end_month": N_(
        "at the slow end of the time range (%(days_text)s) the run needs %(slow_months)s "
        "months per node instead of %(months)s"
    ),
    "note.no_promised_date": N_(
        "we cannot promise a delivery date for %(nodes_text)s from stock: the finish date "
        "is a sales conversation"
    ),
    "note.misses_deadline_delivery": N_(
        "misses your %(max_days)s-day deadline: delivery takes %(lead_days_text)s and "
        "training %(days_text)s, so the run ends on day %(finish_day)s"
    ),
    "note.misses_deadline": N_(
        "misses your %(max_days)s-day target (%(days_text)s): more nodes would be needed "
        "than scale efficiently, or memory limits the layout"
    ),
    "note.over_self_serve": N_(
        "%(nodes)s nodes is more than the %(max_nodes)s we sell self-serve: talk to sales "
        "for a cluster (private network, delivery plan)"
    ),
    "note.sales_only_sku": N_(
        "%(name)s: %(min_months)s to %(max_months)s month terms, priced per GPU; talk to "
        "sales (not a self-serve checkout)"
    ),
    "note.fits": N_(
        "fits with %(headroom_gb).1f GB headroom per GPU below %(limit_pct)s %% of the "
        "usable %(usable_gib).1f GiB"
    ),
    "fit.range": N_("likely %(likely_gb).1f GB per GPU, between %(low_gb).1f and %(high_gb).1f GB"),
    "fit.tight": N_(
        "Tight: the likely %(likely_gb).1f GB per GPU is under the %(limit_gb).1f GB fit "
        "limit, but the upper estimate (%(high_gb).1f GB) is not. It may run out of memory "
        "with some software versions: check memory on a short trial run first, or choose "
        "more nodes or a leaner layout."
    ),
    "note.needs_memory": N_("needs %(need_gb).1f GB per GPU, limit %(limit_gb).1f GB"),
    "note.offload_exceeds_ram": N_("offloaded optimizer state exceeds the node's RAM"),
    "note.hourly_cheaper": N_(
        "paying per GPU-hour elsewhere would be cheaper for this run "
        "(%(hourly_usd)s against %(rental_usd)s)"
    ),
    "note.over_a_year": N_(
        "takes %(years).1f years on %(nodes_text)s: more self-serve nodes cannot finish "
        "it within 12 months for a similar price"
    ),
    "note.utilisation": N_(
        "the run uses %(pct).0f %% of the %(months_text)s paid for on each node"
    ),
    "note.optimizer_offload": N_(
        "optimizer step on the CPU (master weights, optimizer state and gradients in host "
        "memory): slower steps"
    ),
    "note.full_recompute": N_(
        "full activation recomputation: about one extra forward pass per step"
    ),
    "note.eager_parallel": N_(
        "tensor, context or expert parallelism without torch.compile: published eager runs "
        "like this one computed about %(pct).0f %% slower, and this estimate includes it; "
        "with torch.compile on it does not apply"
    ),
    "note.dataset_not_on_nvme": N_("the tokenized dataset does not fit the node's NVMe; stream it"),
    "note.no_checkpoint_on_nvme": N_("no full checkpoint fits on NVMe beside the dataset"),
    # --- warnings (``warning_codes``) ------------------------------------------------------
    "warning.hourly_cheaper": N_(
        "for this run, paying per GPU-hour elsewhere is cheaper than whole rented months; "
        "monthly pays off with more work queued on the node"
    ),
    "warning.long_context_logits": N_(
        "long context with a large vocabulary: the logits buffer is large; chunked "
        "cross-entropy helps"
    ),
    "warning.beyond_native_context": N_(
        "%(seq_len)s tokens is longer than the %(max_seq_len)s this model was pre-trained "
        "with: the run is sized as asked, but past that length the model needs its position "
        "encoding extended (e.g. RoPE scaling) to train well"
    ),
    "warning.over_a_year": N_("the shortest fitting run takes more than a year"),
    "warning.mfu_high": N_("MFU %(mfu).2f is above what public runs reach (about %(max)s)"),
    # --- the recommendation (``reason_code`` and ``reason_codes``) -----------------------
    "reason.cheapest": N_(
        "%(nodes)s × %(name)s (%(gpus)s GPUs): the cheapest plan that fits, finishing "
        "soonest among plans within %(tie_pct)s %% of that price — %(days_text)s at "
        "%(mfu_pct).0f %% effective MFU, %(months_text)s per node, %(cost_usd)s."
    ),
    "reason.deadline": N_(
        "%(nodes)s × %(name)s (%(gpus)s GPUs): the cheapest plan that meets your "
        "%(max_days)s-day deadline — %(days_text)s at %(mfu_pct).0f %% effective MFU, "
        "%(months_text)s per node, %(cost_usd)s."
    ),
    "reason.deadline_missed_finish": N_(
        "Nothing finishes within %(max_days_text)s of today, delivery included; the earliest "
        "finish is %(nodes)s × %(name)s: delivered in %(lead_days_text)s, trained in "
        "%(days_text)s, done on day %(finish_day)s, %(cost_usd)s."
    ),
    "reason.sales_pinned": N_(
        "%(nodes)s × %(name)s (%(gpus)s GPUs) is more than we sell self-serve: talk to sales "
        "— %(days_text)s, %(months_text)s per node, %(cost_usd)s at list price."
    ),
    "reason.deadline_no_date": N_(
        "Nothing finishes within %(max_days_text)s for certain: %(nodes)s × %(name)s trains in "
        "%(days_text)s, but we cannot promise a delivery date for it from stock. Talk to "
        "sales, who will confirm when it can be delivered (%(cost_usd)s at list price)."
    ),
    "reason.deadline_missed": N_(
        "Nothing finishes within %(max_days_text)s; %(nodes)s × %(name)s is the fastest "
        "plan we found: %(days_text)s, %(cost_usd)s."
    ),
    "reason.within_year": N_(
        "%(nodes)s × %(name)s (%(gpus)s GPUs) finishes within 12 months — %(days_text)s, "
        "%(months_text)s per node, %(cost_usd)s — for at most %(extra_pct)s %% more "
        "than the cheapest plan, which would take over a year."
    ),
    "reason.sales_cluster": N_(
        "Nothing self-serve finishes within 12 months: talk to sales about a cluster of "
        "%(nodes)s × %(name)s (%(gpus)s GPUs) — %(days_text)s, %(months_text)s per "
        "node, %(cost_usd)s at list price."
    ),
    "reason.sales_deadline": N_(
        "Meeting your %(max_days)s-day deadline takes a cluster beyond self-serve: talk to "
        "sales about %(nodes)s × %(name)s (%(gpus)s GPUs) — %(days_text)s, %(cost_usd)s "
        "at list price."
    ),
    "reason.sales_rack": N_(
        "Nothing self-serve fits: %(nodes)s × %(name)s is a sales conversation — "
        "%(days_text)s, %(months_text)s, %(cost_usd)s."
    ),
    "reason.only_unaccepted_platform": N_(
        "Only %(name)s fits this job, and it needs a training stack that runs on ROCm, "
        "which you did not accept: there is no node to check out here. Talk to sales about "
        "a larger cluster, or say your stack runs on ROCm."
    ),
    "reason.picked_unaccepted_platform": N_(
        "%(name)s fits this job, but it needs a training stack that runs on ROCm: say your "
        "stack runs on ROCm to check it out, or choose another node."
    ),
    "reason.tight_only": N_(
        "Tight: no option keeps the upper memory estimate under the limit; this one fits at "
        "the likely value, so check memory on a short trial run before committing."
    ),
    "reason.framework_layout": N_(
        "%(framework)s cannot run the layout you set: it offers no tensor, pipeline, context "
        "or expert parallelism of that kind. Leave the layout to us, or choose a framework "
        "that runs it."
    ),
    "reason.nothing_fits": N_(
        "No configuration fits within the searched node counts; reduce the sequence length "
        "or micro-batch, enable recomputation or offload, or use a smaller model."
    ),
    "reason.utilisation": N_(
        "The run uses %(pct).0f %% of the %(months_text)s paid for on each node."
    ),
    "reason.rocm_cheaper": N_(
        "%(nodes)s × %(name)s would cost %(cost_usd)s, but only suits a training stack that "
        "already runs on ROCm (say so to include it)."
    ),
    "reason.runner_up_layout": N_("Runner-up layout on the same node: %(layout)s."),
    "reason.next_best": N_("Next best: %(nodes)s × %(name)s at %(cost_usd)s, %(days_text)s."),
    "reason.single_gpu": N_(
        "Consider a single-GPU offer instead: the job fits one %(gpu_gb)s GB GPU and trains "
        "there in %(days_text)s; an 8-GPU node is more than this job needs."
    ),
    # --- assumptions (``assumption_codes``) ------------------------------------------------
    "assumption.time_profile": N_(
        "time is modelled for %(framework)s as its current release runs (its fused kernels, "
        "the communication it overlaps and the layouts it offers: docs/sizing-accuracy-time.md); "
        "the range runs from a tuned run (%(fast_pct)s %% faster than the likely figure) to a "
        "first-week run (%(slow_pct)s %% slower); months and price use the likely figure"
    ),
    "assumption.release": N_(
        "memory and time figures assume %(release)s, the newest stable release we model; "
        "older releases keep and run the same layout differently"
    ),
    "assumption.time_nearest": N_(
        "no public measured %(framework)s run with its layout is in our set: its profile starts "
        "from %(nearest)s's and carries the widest range"
    ),
    "assumption.usable_memory": N_(
        "usable GPU memory is the catalog's driver-reported figure; fit decisions keep "
        "%(margin_pct)s %% of it free (headroom is reported below that line)"
    ),
    "assumption.model_states": N_(
        "model states: BF16 weights %(weight_b)s B/param%(fp8)s, gradients %(grad_b)s B, "
        "%(master)s, %(optimizer)s"
    ),
    "assumption.fp8_copy": N_(" (+%(b)s B FP8 weight copy, Transformer Engine style)"),
    "assumption.master_fp32": N_("FP32 master %(b)s B"),
    "assumption.no_master": N_("no FP32 master copy (pure BF16)"),
    "assumption.adam": N_("Adam moments %(b)s B"),
    "assumption.adam8bit": N_("8-bit Adam %(b)s B"),
    "assumption.sharding": N_(
        "ZeRO-1 shards optimizer and master weights, ZeRO-2 also gradients, ZeRO-3/FSDP also "
        "weights, over the shard group; TP/PP/EP divide what each rank holds; sequence "
        "parallel with TP"
    ),
    "assumption.activations": N_(
        "activations per layer from the real dimensions (16-bit, dropout-free pre-norm "
        "blocks, gated MLP, GQA); selective recompute drops attention scores and the MLP "
        "activation output; full keeps only each layer's input; a 1F1B pipeline keeps pp "
        "micro-batches in flight on the first stage"
    ),
    "assumption.logits": N_(
        "logits + cross-entropy buffer %(ce_b)s B per logit on the last stage (an unfused "
        "FP32 loss can need about 10 B)"
    ),
    "assumption.overhead": N_(
        "framework overhead: CUDA context %(cuda_gib).2f GiB + NCCL %(nccl_gib).2f GiB per "
        "parallel group in use + ZeRO-3 gather buffers (2 prefetched units + 1 gradient "
        "unit) + %(frag_pct)s %% allocator fragmentation on activations and buffers"
    ),
    "assumption.flops": N_("training FLOPs = %(k)s × active params × tokens%(attention)s"),
    "assumption.time_given_mfu": N_(
        "time = FLOPs / (GPUs × dense peak × MFU × layout efficiency), with the MFU you gave"
    ),
    "assumption.attention_added": N_(" + 12·L·h·s·tokens attention term"),
    "assumption.attention_apart": N_(" (attention term reported separately, not added)"),
    "assumption.time_model": N_(
        "time = FLOPs / (GPUs × dense peak of the precision × MFU), with the MFU predicted for "
        "each layout by the throughput model (GEMM efficiency by size and precision, "
        "attention, memory-bound work, TP/CP/EP/DP traffic over NVLink and the network, "
        "pipeline bubble); the layout efficiencies below only order the layouts tried"
    ),
    "assumption.batch": N_(
        "optimizer steps of %(mtokens).3g M tokens (%(seqs)d × %(seq_len)d-token sequences): "
        "DeepSeek LLM's compute-optimal batch for this run's FLOPs, rounded to a power of two "
        "and to at least one sequence; set a global batch to price your own"
    ),
    "assumption.global_batch": N_(
        "global batch as given, in sequences per step: %(gbs)d; each data-parallel rank runs "
        "whole micro-batches, so a layout whose ranks × micro-batch exceed it is priced at "
        "one micro-batch per rank"
    ),
    "assumption.efficiency": N_(
        "layout efficiency (ours, heuristic): full recompute %(full)s, selective "
        "%(selective)s, TP8 %(tp8)s, PP %(pp)s, FSDP across nodes %(fsdp_nodes)s, EP %(ep)s, "
        "CP %(cp)s, optimizer offload %(offload)s"
    ),
    "assumption.rental": N_(
        "a month is %(hours)s hours; each node is rented in whole months; money is computed "
        "in cents; plans within %(tie_pct)s %% of the cheapest count as equally cheap and "
        "the soonest finish wins"
    ),
    "assumption.storage": N_(
        "checkpoint with optimizer state about %(ckpt_b)s B/param (range %(lo_b)s–%(hi_b)s); "
        "dataset stored as token IDs (2 B if the vocabulary fits 16 bits, else 4 B), copied "
        "to each node; checkpoints written sharded across nodes"
    ),
    "assumption.derived": N_(
        "architecture derived from the parameter count (Llama-3-style: %(layers)s layers, "
        "hidden %(hidden)s, FFN %(ffn)s, vocab %(vocab)s); give a preset or architecture "
        "for exact activations"
    ),
    "assumption.adapters": N_(
        "%(method)s: base weights frozen (%(base)s), rank-%(rank)s adapters on every "
        "attention and MLP projection; FLOPs %(k)s·N·T (no weight gradients)"
    ),
    "assumption.search": N_(
        "layout searched: pinned fields (recompute, offload_optimizer, micro_batch_size) are "
        "kept as given; the rest is chosen for the lowest rental cost, then the shortest time"
    ),
    "assumption.largest_model": N_(
        "BF16 weights and gradients, FP32 master, AdamW; FSDP/ZeRO-3 over the node's GPUs; "
        "micro-batch 1; Llama-3-style architecture derived from the parameter count; "
        "%(margin_pct)s %% safety margin"
    ),
}


# Counted phrases: a template says "%(months_text)s" and the renderer makes "1 month",
# "3 months" or "3 个月" from the ``months`` parameter (issue 19, defect 7: no "month(s)").
# The form is picked by the English rule (one / other) and then translated, which is right
# for English and Chinese; a language with more plural forms would need ngettext here.
# A float count (a lead time in days) is shown whole, and its form follows the whole number.
COUNTED: dict[str, tuple[str, str, str]] = {
    "months_text": ("months", N_("%(n)s month"), N_("%(n)s months")),
    "nodes_text": ("nodes", N_("%(n)s node"), N_("%(n)s nodes")),
    "max_days_text": ("max_days", N_("%(n)s day"), N_("%(n)s days")),
    "lead_days_text": ("lead_days", N_("%(n)s day"), N_("%(n)s days")),
}


def _is_one(n: Any) -> bool:
    """Whether a count (a number, or a number as text: a deadline is passed as "1") is one."""
    try:
        return float(n) == 1
    except (TypeError, ValueError):
        return False


def days_text(days: float, translate: Translate | None = None) -> str:
    """A duration as a reader can use it: days to one decimal (grouped: "1,494.1 days", as
    the cards write numbers), hours under a day, whole minutes under an hour, "under a
    minute" below that (never "0.0 days", nor "0.1 hours" for a 21-second run)."""
    tr = translate or _identity
    hours = days * 24
    if days >= 1 or round(hours, 1) >= 24:  # 23.98 hours is "1.0 days", not "24.0 hours"
        return tr(N_("%(n)s days")) % {"n": f"{max(days, 1.0):,.1f}"}
    minutes = round(hours * 60)
    if hours >= 1 or minutes >= 60:  # 59.7 minutes is "1.0 hours", not "60 minutes"
        return tr(N_("%(n)s hours")) % {"n": f"{max(hours, 1.0):.1f}"}
    if minutes >= 1:
        return tr(N_("%(n)s minute") if minutes == 1 else N_("%(n)s minutes")) % {"n": minutes}
    return tr(N_("under a minute"))


def _identity(s: str) -> str:
    return s


@lru_cache(maxsize=8)
def translator(lang: str | None) -> Translate:
    """gettext for ``lang`` from the compiled catalogs (English when absent or unknown)."""
    if not lang or lang.split("_")[0].split("-")[0].lower() == "en":
        return _identity
    norm = "zh_CN" if lang.lower().startswith("zh") else lang
    # the house's one catalogue loader (app.i18n), as every page and PDF uses
    return translations_for(norm).gettext


def _usd(v: Any) -> str:
    """A dollar amount through the house's one money formatter (``app.money``): US$1,234.56
    in both languages."""
    try:
        return _usd_text(round(float(v) * 100))
    except (TypeError, ValueError, OverflowError):
        return str(v)


@lru_cache(maxsize=4096)
def _usd_text(cents: int) -> str:
    return format_cents(cents, "en")


def render(msg: Msg | Mapping[str, Any], translate: Translate | None = None) -> str:
    """The sentence for ``msg`` in the language of ``translate`` (English by default)."""
    tr = translate or _identity
    if isinstance(msg, Msg):
        code, params = msg.code, dict(msg.params)
    else:
        code, params = str(msg["code"]), dict(msg.get("params") or {})
    template = CATALOG.get(code)
    if template is None:
        return code
    vals: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, Msg) or (isinstance(v, Mapping) and "code" in v):
            vals[k] = render(v, tr)
        elif k.endswith("_usd"):
            vals[k] = _usd(v)
        elif isinstance(v, (list, tuple)):
            vals[k] = ", ".join(str(x) for x in v)
        elif k == "name" and isinstance(v, str) and v:
            vals[k] = tr(v)  # a product name in the reader's words ("GB300 NVL72 整机柜")
        else:
            vals[k] = v
    for key, (source, one, other) in COUNTED.items():
        if source in params and f"%({key})s" in template:
            n = params[source]
            if isinstance(n, float):
                n = round(n)
            vals[key] = tr(one if _is_one(n) else other) % {"n": n}
    if "days" in params and "%(days_text)s" in template:
        vals["days_text"] = days_text(float(params["days"]), tr)
    text = tr(template)
    try:
        return text % vals
    except (KeyError, TypeError, ValueError):
        return template % vals


def render_all(msgs: list[Msg], translate: Translate | None = None) -> list[str]:
    return [render(m, translate) for m in msgs]
