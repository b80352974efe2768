"""Turn measure.py results into cases of the public memory or throughput set.

``python tools/gpu_memory/to_cases.py tools/gpu_memory/results/h200-2026-11-30.jsonl``
replaces the memory set's (bench/data/memory-public.json) ``h200-`` cases with one case per
measured (or out-of-memory) row.

``python tools/gpu_memory/to_cases.py --time tools/gpu_memory/results/h200-2026-12-04-float8.jsonl``
replaces the throughput set's (bench/data/throughput-public.json) cases read from that file
with one ``own_h200_single_gpu`` case per measured row (cases from other files stay).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "bench" / "data" / "memory-public.json"
TIME_PUBLIC = ROOT / "bench" / "data" / "throughput-public.json"
PRESET = {"llama-3.2-1b": "llama-3.2-1b", "llama-3.2-3b": "llama-3.2-3b"}
# measurement shapes with fewer layers than the model they come from (no product preset)
SHAPES = {
    "llama-3.1-8b-16l": "Llama 3.1 8B's layer shapes, 16 of 32 layers",
    "llama-3.1-70b-4l": "Llama 3.1 70B's layer shapes, 4 of 80 layers",
    "llama-3.1-405b-1l": "Llama 3.1 405B's layer shapes, 1 of 126 layers, tied embedding",
    "qwen3-30b-a3b-4l": "Qwen3-30B-A3B's layer shapes, 4 of 48 layers, no q/k norms",
    "mixtral-8x7b-2l": "Mixtral 8x7B's layer shapes, 2 of 32 layers",
}
SOURCE = (
    "own measurement: tools/gpu_memory/measure.py on one NVIDIA H200 (141 GB{driver}), "
    "PyTorch {torch}, {date}; raw rows in tools/gpu_memory/results/{file}"
)
# the driver as nvidia-smi reported it, where the run's log kept it
DRIVER = {"2026-11-30": ", driver 580.159.04"}
HOW = (
    "Llama-architecture decoder written in the script (torchtitan-style: RMSNorm, complex "
    "RoPE, K/V heads repeated before scaled_dot_product_attention, eager SwiGLU), FSDP2 "
    "fully_shard per block and at the root on one rank (FP32 parameters = master copy, BF16 "
    "gathered, FP32 gradient reduction), fused AdamW, logits upcast to FP32 for the loss and "
    "not kept for backward; seq {seq}, micro-batch {mbs}, activation checkpointing {ac}"
    "{compile}; peak over 3 steps after a warm-up step"
)


def case(row: dict[str, object], file: str) -> dict[str, object]:
    model = str(row["model"])
    cfg: dict[str, object] = {
        "framework": "fsdp2",
        "sharding": "zero3",
        "dp": 1,
        "seq_len": row["seq"],
        "mbs": row["mbs"],
        "recompute": row["ac"],
    }
    if row.get("compile"):
        cfg["compile"] = True
    if row.get("float8"):
        cfg["precision"] = "fp8"
    if model in PRESET:
        cfg = {"preset": PRESET[model], **cfg}
    else:
        a = row["arch"]
        assert isinstance(a, dict)
        cfg = {
            "preset": f"{model} ({SHAPES[model]}; no product preset)",
            "arch": {
                "vocab_size": a["vocab"],
                "hidden_size": a["hidden"],
                "intermediate_size": a["ffn"],
                "num_layers": a["layers"],
                "num_attention_heads": a["heads"],
                "num_kv_heads": a["kv_heads"],
                "head_dim": a["head_dim"],
                "tie_embeddings": a["tied"],
                **(
                    {
                        "moe": {
                            "num_experts": a["experts"],
                            "experts_per_token": a["top_k"],
                            "expert_intermediate_size": a["expert_ffn"],
                        }
                    }
                    if a.get("experts")
                    else {}
                ),
            },
            **cfg,
        }
    oom = "oom" in row
    ac = {"none": "off", "full": "full (whole block)", "selective": "op-level selective"}
    return {
        "id": f"h200-{row['id']}" + ("-OOM" if oom else ""),
        "source": SOURCE.format(
            torch=row.get("torch", "2.11"),
            file=file,
            date=file[5:15],
            driver=DRIVER.get(file[5:15], ""),
        ),
        "gpu": "H200 141 GB (139.8 GiB as the driver reports)",
        "gpu_usable_gib": 139.8,
        "metric": "allocator reserved (torch.cuda.max_memory_reserved, as torchtitan logs it)",
        "measured_gib": None if oom else row["max_reserved_gib"],
        "measured_allocated_gib": None if oom else row["max_allocated_gib"],
        # the device's peak: the allocator's peak reserve plus what it does not manage
        # (CUDA context, NCCL, cuBLAS workspaces), read after the steps
        "measured_device_gib": None
        if oom
        else round(
            float(row["max_reserved_gib"])  # type: ignore[arg-type]
            + float(row["device_used_gib"])  # type: ignore[arg-type]
            - float(row["reserved_now_gib"]),  # type: ignore[arg-type]
            3,
        ),
        "outcome": "OOM" if oom else "ran",
        "how_read": HOW.format(
            seq=row["seq"],
            mbs=row["mbs"],
            ac=ac[str(row["ac"])],
            compile=", torch.compile per block" if row.get("compile") else "",
            float8=f", torchao float8 training ({row['float8']} scaling) on the blocks' "
            "linear layers"
            if row.get("float8")
            else "",
        ),
        "config": cfg,
    }


def time_case(row: dict[str, object], file: str) -> dict[str, object]:
    """One case of the throughput set: the measured tokens/s of one configuration."""
    recipe = str(row.get("float8") or "")
    how = (
        "mean step time of 3 steps after a warm-up step; FSDP2 on one rank, fused AdamW, "
        "SDPA (flash), eager" + (" + torch.compile per block" if row.get("compile") else "")
    )
    if recipe:
        how += (
            f"; torchao float8 training, {recipe} scaling, on every linear layer of the "
            "blocks (output projection in BF16)"
        )
    case: dict[str, object] = {
        "id": f"h200-{row['id']}",
        "group": "own_h200_single_gpu",
        "model": f"{row['model']}-measured",
        "gpu": "H200",
        "num_gpus": 1,
        "precision": "fp8" if recipe else "bf16",
        "seq_len": row["seq"],
        "micro_batch_size": row["mbs"],
        "global_batch_size": row["mbs"],
        "parallelism": {"tp": 1, "cp": 1, "ep": 1, "pp": 1, "vpp": 1, "dp": 1},
        "sharding": "zero3",
        "recompute": row["ac"],
        "measured": {"tokens_per_sec_per_gpu": row["tokens_per_s"]},
        "source": {
            "citation": f"own measurement: tools/gpu_memory/measure.py on one H200, PyTorch "
            f"{row.get('torch', '2.11')}, {file[5:15]} (tools/gpu_memory/results/{file})",
            "how_read": how,
        },
    }
    if recipe:
        case["fp8_recipe"] = recipe
    return case


def dump_time_set(data: dict[str, object]) -> str:
    """The throughput set as it is kept: one architecture and one case per line."""
    lines = ["{"]
    for i, (key, value) in enumerate(data.items()):
        comma = "," if i < len(data) - 1 else ""
        if key == "architectures":
            assert isinstance(value, dict)
            items = [
                f"    {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                for k, v in value.items()
            ]
            lines += [f'  "{key}": {{', ",\n".join(items), "  }" + comma]
        elif key == "measured_cases":
            assert isinstance(value, list)
            items = ["    " + json.dumps(c, ensure_ascii=False) for c in value]
            lines += [f'  "{key}": [', ",\n".join(items), "  ]" + comma]
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    return "\n".join(lines + ["}"]) + "\n"


def main_time(paths: list[str]) -> None:
    data = json.loads(TIME_PUBLIC.read_text(encoding="utf-8"))
    cases = data["measured_cases"]
    for arg in paths:
        path = Path(arg)
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        new = [time_case(r, path.name) for r in rows if "tokens_per_s" in r]
        cases = [c for c in cases if f"results/{path.name})" not in c["source"].get("citation", "")]
        cases += new
        print(f"{len(new)} cases from {path.name}")
    data["measured_cases"] = cases
    TIME_PUBLIC.write_text(dump_time_set(data), encoding="utf-8")


def main() -> None:
    if sys.argv[1:2] == ["--time"]:
        main_time(sys.argv[2:])
        return
    new = []
    for arg in sys.argv[1:]:
        path = Path(arg)
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        new += [case(r, path.name) for r in rows if "error" not in r and "skipped" not in r]
    data = json.loads(PUBLIC.read_text(encoding="utf-8"))
    note = " The h200- cases are our own runs: tools/gpu_memory/ (script and raw output)."
    if note not in data["about"]:
        data["about"] += note
    data["cases"] = [c for c in data["cases"] if not c["id"].startswith("h200-")] + new
    PUBLIC.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(new)} cases written to {PUBLIC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
