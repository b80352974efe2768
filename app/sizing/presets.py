"""Model presets with exact parameter counts and where each figure comes from.

``published_params`` is the exact count the test suite checks the architecture against
(±0.1 %). For the models in ``shared/data/sizing-calibration.json`` (``model_configs``) it
is that file's ``params_exact_computed_from_config`` (itself corroborated there against
Hugging Face safetensors totals); for the extra presets the source is named in ``sources``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sizing.params import MLA, Architecture, MoE

CAL = "shared/data/sizing-calibration.json model_configs"


@dataclass(frozen=True)
class Preset:
    id: str
    name: str
    arch: Architecture
    max_seq_len: int
    published_params: int
    published_active: int | None = None
    sources: dict[str, str] = field(default_factory=dict)


def _llama(
    vocab: int, h: int, ffn: int, layers: int, heads: int, kv: int, *, tie: bool = False
) -> Architecture:
    return Architecture(vocab, h, ffn, layers, heads, kv, h // heads, tie_embeddings=tie)


def _qwen25(h: int, ffn: int, layers: int, heads: int, kv: int) -> Architecture:
    return Architecture(152064, h, ffn, layers, heads, kv, 128, qkv_bias=True)


_QWEN25_SRC = {
    "arch": "NVIDIA/NeMo nemo/collections/llm/gpt/model/qwen2.py @8cfedd72 Qwen25Config*; "
    "HF Qwen/Qwen2.5-* config.json (max_position_embeddings 32768)",
    "count": CAL,
}
_LLAMA31_SRC = {
    "arch": "meta-llama/llama-models models/sku_list.py; context 128k per MODEL_CARD.md",
    "count": CAL + " (matches HF safetensors totals)",
}

_LIST: tuple[Preset, ...] = (
    Preset(
        "llama-3.1-8b",
        "Llama 3.1 8B",
        _llama(128256, 4096, 14336, 32, 32, 8),
        131072,
        8030261248,
        sources=_LLAMA31_SRC,
    ),
    Preset(
        "llama-3.1-70b",
        "Llama 3.1 70B",
        _llama(128256, 8192, 28672, 80, 64, 8),
        131072,
        70553706496,
        sources=_LLAMA31_SRC,
    ),
    Preset(
        "llama-3.1-405b",
        "Llama 3.1 405B",
        _llama(128256, 16384, 53248, 126, 128, 8),
        131072,
        405853388800,
        sources=_LLAMA31_SRC,
    ),
    Preset(
        "llama-3.2-1b",
        "Llama 3.2 1B",
        _llama(128256, 2048, 8192, 16, 32, 8, tie=True),
        131072,
        1235814400,
        sources={
            "arch": "HF meta-llama/Llama-3.2-1B config.json (tie_word_embeddings true, "
            "head_dim 64)",
            "count": "HF safetensors total 1,235,814,400 (model page '1.24B')",
        },
    ),
    Preset(
        "llama-3.2-3b",
        "Llama 3.2 3B",
        _llama(128256, 3072, 8192, 28, 24, 8, tie=True),
        131072,
        3212749824,
        sources={
            "arch": "HF meta-llama/Llama-3.2-3B config.json (tie_word_embeddings true)",
            "count": "HF safetensors total 3,212,749,824 (model page '3.21B')",
        },
    ),
    Preset(
        "llama-2-7b",
        "Llama 2 7B",
        _llama(32000, 4096, 11008, 32, 32, 32),
        4096,
        6738415616,
        sources={
            "arch": "meta-llama/llama params.json / HF Llama-2-7b-hf config.json",
            "count": "HF safetensors total 6,738,415,616",
        },
    ),
    Preset(
        "llama-2-70b",
        "Llama 2 70B",
        _llama(32000, 8192, 28672, 80, 64, 8),
        4096,
        68976648192,
        sources={
            "arch": "meta-llama/llama params.json / HF Llama-2-70b-hf config.json",
            "count": "HF safetensors total 68,976,648,192",
        },
    ),
    Preset(
        "qwen2.5-7b",
        "Qwen2.5 7B",
        _qwen25(3584, 18944, 28, 28, 4),
        32768,
        7615616512,
        sources=_QWEN25_SRC,
    ),
    Preset(
        "qwen2.5-14b",
        "Qwen2.5 14B",
        _qwen25(5120, 13824, 48, 40, 8),
        32768,
        14770033664,
        sources=_QWEN25_SRC,
    ),
    Preset(
        "qwen2.5-32b",
        "Qwen2.5 32B",
        _qwen25(5120, 27648, 64, 40, 8),
        32768,
        32763876352,
        sources=_QWEN25_SRC,
    ),
    Preset(
        "qwen2.5-72b",
        "Qwen2.5 72B",
        _qwen25(8192, 29568, 80, 64, 8),
        32768,
        72706203648,
        sources=_QWEN25_SRC,
    ),
    Preset(
        "qwen3-8b",
        "Qwen3 8B",
        Architecture(151936, 4096, 12288, 36, 32, 8, 128, qk_norm=True),
        32768,
        8190735360,
        sources={
            "arch": "NVIDIA/NeMo qwen3.py @8cfedd72 Qwen3Config8B; native context 32k",
            "count": CAL,
        },
    ),
    Preset(
        "qwen3-30b-a3b",
        "Qwen3 30B-A3B (MoE)",
        Architecture(151936, 2048, 6144, 48, 32, 4, 128, qk_norm=True, moe=MoE(128, 8, 768)),
        32768,
        30532122624,
        3353032704,
        sources={
            "arch": "NVIDIA/NeMo qwen3.py @8cfedd72 Qwen3Config30B_A3B; native context 32k",
            "count": CAL,
        },
    ),
    Preset(
        "mistral-7b-v0.3",
        "Mistral 7B v0.3",
        _llama(32768, 4096, 14336, 32, 32, 8),
        32768,
        7248023552,
        sources={
            "arch": "HF mistralai/Mistral-7B-Instruct-v0.3 config.json @c170c708",
            "count": CAL,
        },
    ),
    Preset(
        "mixtral-8x7b",
        "Mixtral 8x7B",
        Architecture(32000, 4096, 14336, 32, 32, 8, 128, moe=MoE(8, 2, 14336)),
        32768,
        46702792704,
        12879925248,
        sources={
            "arch": "HF mistralai/Mixtral-8x7B-Instruct-v0.1 config.json @eba92302",
            "count": CAL + " (46.7B total / 12.9B active stated by Mistral AI)",
        },
    ),
    Preset(
        "mixtral-8x22b",
        "Mixtral 8x22B v0.1",
        Architecture(32000, 6144, 16384, 56, 48, 8, 128, moe=MoE(8, 2, 16384)),
        65536,
        140620634112,
        39152031744,
        sources={
            "arch": "HF mistral-community/Mixtral-8x22B-v0.1 config.json (vocab 32000)",
            "count": CAL + " (141B / 39B stated by Mistral AI)",
        },
    ),
    Preset(
        "deepseek-v3",
        "DeepSeek-V3 (671B MoE, MLA; MTP module excluded)",
        Architecture(
            129280,
            7168,
            18432,
            61,
            128,
            128,
            128,
            moe=MoE(256, 8, 2048, shared_experts=1, dense_layers=3, router_bias=True),
            mla=MLA(1536, 512, 128, 64, 128),
        ),
        131072,
        671026419200,
        37552297472,
        sources={
            "arch": "deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json @9b4e978",
            "count": CAL + " (671B stated; active 37.55B counts embedding and head, "
            "README says 37B)",
        },
    ),
    Preset(
        "gemma-2-9b",
        "Gemma 2 9B",
        Architecture(256000, 3584, 14336, 42, 16, 8, 256, tie_embeddings=True, norms_per_layer=4),
        8192,
        9241705984,
        sources={
            "arch": "google-deepmind/gemma _gemma.py @7691fd4 Gemma2_9B; HF vocab 256000",
            "count": CAL,
        },
    ),
    Preset(
        "gemma-2-27b",
        "Gemma 2 27B",
        Architecture(256000, 4608, 36864, 46, 32, 16, 128, tie_embeddings=True, norms_per_layer=4),
        8192,
        27227128320,
        sources={
            "arch": "google-deepmind/gemma _gemma.py @7691fd4 Gemma2_27B; HF vocab 256000",
            "count": CAL,
        },
    ),
)

# --- 2025 models (issue 16) -----------------------------------------------------------------
# Architectures are the text models' published config.json values; exact counts are
# computed from them and checked against each publisher's stated total (±0.1 %).


def _gpt_oss(layers: int, experts: int) -> Architecture:
    return Architecture(
        vocab_size=201088,
        hidden_size=2880,
        intermediate_size=2880,
        num_layers=layers,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=64,
        qkv_bias=True,
        o_bias=True,
        attention_sinks=True,
        moe=MoE(experts, 4, 2880, router_bias=True, expert_bias=True),
        sliding_window=128,
        local_layer_fraction=0.5,
    )


def _llama4(experts: int, moe_every: int) -> Architecture:
    return Architecture(
        vocab_size=202048,
        hidden_size=5120,
        intermediate_size=16384,  # intermediate_size_mlp: the dense blocks' MLP
        num_layers=48,
        num_attention_heads=40,
        num_kv_heads=8,
        head_dim=128,
        moe=MoE(experts, 1, 8192, shared_experts=1, moe_every=moe_every),
        sliding_window=8192,  # attention_chunk_size; every 4th layer is global (NoPE)
        local_layer_fraction=0.75,
    )


_GPT_OSS_SRC = (
    "OpenAI gpt-oss-120b & gpt-oss-20b model card (arXiv 2508.10925) table 1 states the "
    "totals ({total}) and active ({active}, without the input embedding); computed count "
    "matches to the stated digits"
)
_LLAMA4_SRC = (
    "meta-llama/llama-models models/llama4 MODEL_CARD.md: {stated} (the total includes the "
    "vision encoder, not counted here); text-model count computed from the config"
)

_LIST_2025: tuple[Preset, ...] = (
    Preset(
        "qwen3-32b",
        "Qwen3 32B",
        Architecture(151936, 5120, 25600, 64, 64, 8, 128, qk_norm=True),
        32768,
        32762123264,
        sources={
            "arch": "HF Qwen/Qwen3-32B config.json (hidden 5120, 64 layers, 64 q / 8 kv heads, "
            "head_dim 128, intermediate 25600, untied, QK-norm; native context 32,768)",
            "count": "Qwen3 Technical Report (arXiv 2505.09388) table 1: 32.8B total, 31.2B "
            "non-embedding; computed 32,762,123,264",
        },
    ),
    Preset(
        "qwen3-235b-a22b",
        "Qwen3 235B-A22B (MoE)",
        Architecture(151936, 4096, 12288, 94, 64, 4, 128, qk_norm=True, moe=MoE(128, 8, 1536)),
        32768,
        235093634560,
        22190763520,
        sources={
            "arch": "HF Qwen/Qwen3-235B-A22B config.json (hidden 4096, 94 layers, 64 q / 4 kv "
            "heads, 128 experts, 8 routed, moe_intermediate 1536, no shared expert)",
            "count": "Qwen3 Technical Report (arXiv 2505.09388) table 2: 235B total, 22B "
            "activated; HF safetensors total 235,093,634,560",
        },
    ),
    Preset(
        "gpt-oss-20b",
        "gpt-oss-20b (MoE, sliding window + sinks)",
        _gpt_oss(24, 32),
        131072,
        20914757184,
        sources={
            "arch": "HF openai/gpt-oss-20b config.json (24 layers, 32 experts, 4 per token, "
            "hidden 2880, head_dim 64, 64 q / 8 kv heads, sliding_window 128 on alternate "
            "layers, attention sinks, biased q/k/v/o, router and experts)",
            "count": _GPT_OSS_SRC.format(total="20.91B", active="3.61B"),
        },
    ),
    Preset(
        "gpt-oss-120b",
        "gpt-oss-120b (MoE, sliding window + sinks)",
        _gpt_oss(36, 128),
        131072,
        116829156672,
        sources={
            "arch": "HF openai/gpt-oss-120b config.json (36 layers, 128 experts, 4 per token; "
            "otherwise as gpt-oss-20b)",
            "count": _GPT_OSS_SRC.format(total="116.83B", active="5.13B"),
        },
    ),
    Preset(
        "kimi-k2",
        "Kimi K2 (1T MoE, MLA, 384 experts)",
        Architecture(
            163840,
            7168,
            18432,
            61,
            64,
            64,
            128,
            moe=MoE(384, 8, 2048, shared_experts=1, dense_layers=1, router_bias=True),
            mla=MLA(1536, 512, 128, 64, 128),
        ),
        131072,
        1026408232448,
        32861500928,
        sources={
            "arch": "HF moonshotai/Kimi-K2-Instruct config.json (DeepseekV3 architecture: 61 "
            "layers, 1 dense, 384 routed + 1 shared expert, 8 per token, 64 MLA heads, "
            "q_lora 1536, kv_lora 512, vocab 163,840, no MTP layer)",
            "count": "Kimi K2 technical report (arXiv 2507.20534): 1.04T total / 32B "
            "activated (rounded); HF safetensors total 1,026,408,232,448; active computed "
            "with embedding and head",
        },
    ),
    Preset(
        "llama-4-scout",
        "Llama 4 Scout 17B-16E (MoE, text model)",
        _llama4(16, 1),
        262144,
        107769861120,
        17172894720,
        sources={
            "arch": "HF meta-llama/Llama-4-Scout-17B-16E config.json text_config (48 layers, "
            "all MoE, 16 experts top-1 + shared expert, attention_chunk_size 8192, "
            "interleave_moe_layer_step 1); 10M context, 256k used for training sizing",
            "count": _LLAMA4_SRC.format(stated="17B active, 109B total"),
        },
    ),
    Preset(
        "llama-4-maverick",
        "Llama 4 Maverick 17B-128E (MoE, text model)",
        _llama4(128, 2),
        262144,
        400711848960,
        17184691200,
        sources={
            "arch": "HF meta-llama/Llama-4-Maverick-17B-128E config.json text_config (48 "
            "layers, MoE every 2nd layer, 128 experts top-1 + shared expert, dense MLP "
            "16384)",
            "count": _LLAMA4_SRC.format(stated="17B active, 400B total"),
        },
    ),
)

PRESETS: dict[str, Preset] = {p.id: p for p in _LIST + _LIST_2025}
