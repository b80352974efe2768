"""Write every exported launch configuration of a grid of sizing answers to a folder.

The app's side of ``make check-launch``: presets x context lengths x token budgets x SKUs
(each request sized on one SKU: one engine answer) x the four frameworks, plus FP8 and FP4
answers of a few presets and torch.compile answers of two (async TP in torchtitan's file). For each answer
and framework it writes the files (or the refusal) and a manifest that
``tools/launch/check.py`` — run in the separate tools environment with the frameworks
installed — validates with each framework's own parser.

    .venv/bin/python scripts/launch_grid.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from app.catalog.specs import all_specs
from app.sizing.engine import size_result
from app.sizing.launch import FRAMEWORKS, LaunchError, export_plan, invariants, plan_of
from app.sizing.request import validate

PRESETS = (
    "llama-3.2-1b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "qwen2.5-7b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "mixtral-8x7b",
    "gpt-oss-20b",
    "deepseek-v3",
)
CONTEXTS = (4096, 32768)
TOKENS = (2e10, 2e12)
# low precision on a few presets (FP4 only where the SKU has FP4 tensor cores)
LOW_PRECISION = (("llama-3.1-8b", "fp8"), ("llama-3.1-70b", "fp8"), ("qwen3-30b-a3b", "fp8"))
LOW_PRECISION_FP4 = (("llama-3.1-8b", "fp4"), ("llama-3.1-70b", "fp4"))
# torch.compile answers (fsdp2): tensor-parallel layouts with async TP in torchtitan's file
COMPILED = (("llama-3.1-70b", 32768), ("qwen3-32b", 32768))


def requests() -> list[dict[str, object]]:
    out = []
    for preset in PRESETS:
        for seq in CONTEXTS:
            for tokens in TOKENS:
                for s in all_specs():
                    out.append(
                        {"model": {"preset": preset}, "tokens": tokens, "seq_len": seq, "sku": s.id}
                    )
    for preset, precision in LOW_PRECISION + LOW_PRECISION_FP4:
        for s in all_specs():
            if precision == "fp4" and not s.fp4_dense_tflops:
                continue
            out.append(
                {"model": {"preset": preset}, "tokens": 2e12, "precision": precision, "sku": s.id}
            )
    for preset, seq in COMPILED:
        for s in all_specs():
            out.append(
                {
                    "model": {"preset": preset},
                    "tokens": 2e12,
                    "seq_len": seq,
                    "framework": "fsdp2",
                    "compile": True,
                    "sku": s.id,
                }
            )
    return out


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for n, req in enumerate(requests()):
        sreq = validate(req)
        result = size_result(req)
        try:
            plan = plan_of(sreq, result, 0)
        except LaunchError as e:
            manifest.append({"answer": n, "request": req, "no_layout": e.code})
            continue
        broken = invariants(plan)
        for fw in FRAMEWORKS:
            entry: dict[str, object] = {
                "answer": n,
                "request": req,
                "framework": fw,
                "plan": {
                    **asdict(plan),
                    "arch": None,
                    "world": plan.world,
                    "train_steps": plan.train_steps,
                    "warmup_steps": plan.warmup_steps,
                },
                "num_layers": plan.arch.num_layers,
                "invariants": broken,
            }
            try:
                bundle = export_plan(plan, fw)
            except LaunchError as e:
                entry["refused"] = e.as_dict()
            else:
                folder = out / f"{n:04d}-{fw}"
                folder.mkdir(exist_ok=True)
                for f in bundle.files:
                    (folder / f.name).write_text(f.content, encoding="utf-8")
                entry["folder"] = folder.name
                entry["files"] = [f.name for f in bundle.files]
            manifest.append(entry)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    answers = len({m["answer"] for m in manifest})
    print(f"{answers} engine answers, {sum(1 for m in manifest if 'folder' in m)} exports")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "var/launch-grid"))
