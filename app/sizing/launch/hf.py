"""What the Hugging Face-based launchers (DeepSpeed, accelerate) share: the model they load
and the refusals for layouts that need model code of their own (TP, PP, CP, EP)."""

from __future__ import annotations

from app.sizing.launch.errors import N_, LaunchError
from app.sizing.launch.plan import Plan

# preset id -> Hugging Face model id (the config and tokenizer a training script loads)
HF_IDS = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B",
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-hf",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "qwen2.5-14b": "Qwen/Qwen2.5-14B",
    "qwen2.5-32b": "Qwen/Qwen2.5-32B",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B",
    "qwen3-8b": "Qwen/Qwen3-8B-Base",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B-Base",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "mistral-7b-v0.3": "mistralai/Mistral-7B-v0.3",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3-Base",
    "gemma-2-9b": "google/gemma-2-9b",
    "gemma-2-27b": "google/gemma-2-27b",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "kimi-k2": "moonshotai/Kimi-K2-Base",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E",
    "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E",
}


def model_lines(p: Plan) -> list[str]:
    """Comment lines naming the model the training script must build."""
    hf = HF_IDS.get(p.preset or "")
    if hf:
        return [f"Model: {hf} (Hugging Face); your training script loads it."]
    a = p.arch
    dims = (
        f"vocab {a.vocab_size}, hidden {a.hidden_size}, MLP {a.intermediate_size}, "
        f"layers {a.num_layers}, heads {a.num_attention_heads}, KV heads {a.num_kv_heads}, "
        f"head dim {a.head_dim}"
    )
    if a.moe is not None:
        dims += (
            f", {a.moe.num_experts} experts (top {a.moe.experts_per_token}, "
            f"expert MLP {a.moe.expert_intermediate_size})"
        )
    return [f"Model: a custom architecture ({dims}); your training script builds it."]


def model_arg(p: Plan) -> str:
    return HF_IDS.get(p.preset or "", "./model")


def refuse_model_parallel(p: Plan, name: str, code: str) -> None:
    """DeepSpeed's and accelerate's configurations here describe data parallelism
    (replicated or sharded); model parallelism needs model code they do not write."""
    parts: list[tuple[str, int]] = []  # (msgid with %(n)s, degree): pages translate each
    if p.tp > 1:
        parts.append((N_("tensor parallel %(n)s"), p.tp))
    if p.pp > 1:
        if p.pp_schedule == "interleaved":
            parts.append((N_("interleaved pipeline parallel %(n)s"), p.pp))
        else:
            parts.append((N_("pipeline parallel %(n)s"), p.pp))
    if p.cp > 1:
        parts.append((N_("context parallel %(n)s"), p.cp))
    if p.ep > 1:
        parts.append((N_("expert parallel %(n)s"), p.ep))
    kinds = [t % {"n": n} for t, n in parts]
    if kinds:
        raise LaunchError(
            code,
            N_(
                "This layout uses %(kinds)s; the %(name)s configuration written here covers "
                "data parallelism (replicated or sharded) only, and running the layout as "
                "something else would change its memory and speed."
            ),
            {"kinds": ", ".join(kinds), "name": name, "kind_parts": [list(x) for x in parts]},
            ("torchtitan", "megatron"),
        )
    if p.precision in ("fp8", "fp4"):
        raise LaunchError(
            code.replace("model_parallel", "precision"),
            N_(
                "This layout trains in %(precision)s; the %(name)s configuration here trains in BF16."
            ),
            {"precision": p.precision.upper(), "name": name},
            ("torchtitan", "megatron"),
        )
