"""Sizing engine speed: configurations/s vs llm-analysis 0.2.2, and p95 of a full ``size()``.

    python bench/bench_sizing.py            # or: python -m bench.bench_sizing

llm-analysis is not a project dependency: if it is not importable here, it is pip-installed
into a temporary virtualenv (``pip install llm-analysis==0.2.2``) and timed there, in the
same run on the same machine. ``LLM_ANALYSIS_PYTHON=/path/to/python`` reuses an existing
interpreter that has it. Writes docs/benchmarks-sizing.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.sizing import size  # noqa: E402
from app.sizing.memory import Job, Layout, memory  # noqa: E402
from app.sizing.params import count  # noqa: E402
from app.sizing.presets import PRESETS  # noqa: E402

# one "configuration" = a (tp, pp, dp, ZeRO stage, recompute, micro-batch) layout of
# Llama 2 7B at 4k on 80 GB GPUs, evaluated to a per-GPU memory estimate
TPS = (1, 2, 4, 8)
PPS = (1, 2, 4)
DPS = (1, 2, 4, 8)
ZEROS = (0, 1, 2, 3)
RECOMPUTES = (0, 1, 2)  # llm-analysis: none / selective(attn) / full
MBS = (1, 2, 4)

LLM_ANALYSIS_SNIPPET = r"""
import itertools, json, logging, sys, time
from llm_analysis.analysis import LLMAnalysis, ActivationRecomputation, DSZeRO
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.logger import logger
logger.setLevel(logging.ERROR)
cfg = json.loads(sys.argv[1])
model = get_model_config_by_name("NousResearch_Llama-2-7b-hf")
gpu = get_gpu_config_by_name("h100-sxm-80gb")
dtype = get_dtype_config_by_name("w16a16e16")
combos = list(itertools.product(cfg["tps"], cfg["pps"], cfg["dps"], cfg["zeros"],
                                cfg["recomputes"], cfg["mbs"]))
n = 0
errors = {}
t0 = time.perf_counter()
deadline = t0 + cfg["seconds"]
while time.perf_counter() < deadline:
    for tp, pp, dp, z, rc, mbs in combos:
        a = LLMAnalysis(model, gpu, dtype,
                        ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp, sp_size=tp),
                        flops_efficiency=0.4)
        try:
            a.training(batch_size_per_gpu=mbs, seq_len=4096, total_num_tokens=1e9,
                       activation_recomputation=ActivationRecomputation(rc),
                       ds_zero=DSZeRO(z))
        except Exception as e:  # llm-analysis raises when a layout does not fit
            k = type(e).__name__
            errors[k] = errors.get(k, 0) + 1
        n += 1
dt = time.perf_counter() - t0
print(json.dumps({"configs": n, "seconds": dt, "errors": errors}))
"""


def _llm_analysis_python() -> tuple[str | None, str]:
    env = os.environ.get("LLM_ANALYSIS_PYTHON")
    if env:
        return env, "LLM_ANALYSIS_PYTHON"
    try:
        import llm_analysis  # type: ignore[import-not-found]  # noqa: F401

        return sys.executable, "project interpreter"
    except ImportError:
        pass
    venv = Path(tempfile.mkdtemp(prefix="llm-analysis-venv-"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "llm-analysis==0.2.2"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        return None, f"pip install llm-analysis==0.2.2 failed: {r.stderr.strip()[-300:]}"
    return str(py), f"temporary venv {venv}"


def bench_llm_analysis(seconds: float) -> dict[str, Any]:
    py, how = _llm_analysis_python()
    if py is None:
        return {"error": how}
    cfg = {
        "tps": TPS,
        "pps": PPS,
        "dps": DPS,
        "zeros": ZEROS,
        "recomputes": RECOMPUTES,
        "mbs": MBS,
        "seconds": seconds,
    }
    r = subprocess.run(
        [py, "-c", LLM_ANALYSIS_SNIPPET, json.dumps(cfg)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["how"] = how
    out["per_second"] = out["configs"] / out["seconds"]
    return out


def bench_engine(seconds: float) -> dict[str, Any]:
    p = PRESETS["llama-2-7b"]
    job = Job(p.arch, count(p.arch), "full", 4096, "bf16", "adamw", "bf16", True, True, 16)
    sharding = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
    rc_names = {0: "none", 1: "selective", 2: "full"}
    combos = [
        (tp, pp, dp, z, rc, mbs)
        for tp in TPS
        for pp in PPS
        for dp in DPS
        for z in ZEROS
        for rc in RECOMPUTES
        for mbs in MBS
    ]
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for tp, pp, dp, z, rc, mbs in combos:
            lay = Layout(
                sharding[z],
                1 if z == 0 else dp,
                tp,
                pp,
                1,
                1,
                mbs,
                rc_names[rc],
                False,
                False,
                tp * pp * dp,
            )
            job.cache.clear()  # no memo hits: every configuration is computed
            memory(job, lay)
            n += 1
    dt = time.perf_counter() - t0
    return {"configs": n, "seconds": dt, "per_second": n / dt}


def latency_requests() -> list[dict[str, Any]]:
    reqs: list[dict[str, Any]] = []
    for pid in (
        "llama-3.1-8b",
        "qwen2.5-32b",
        "llama-3.1-70b",
        "mixtral-8x7b",
        "llama-3.1-405b",
        "deepseek-v3",
        "qwen3-30b-a3b",
    ):
        for tokens in (1e9, 1e11, 1e12):
            for seq in (4096, 8192):
                reqs.append({"model": {"preset": pid}, "tokens": tokens, "seq_len": seq})
    reqs.append({"model": {"params": 7e9}, "tokens": 1e12})
    reqs.append({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e8, "method": "qlora"})
    return reqs


def bench_latency(rounds: int) -> dict[str, Any]:
    reqs = latency_requests()
    for r in reqs:  # warm caches (catalog load)
        size(r)
    samples: list[float] = []
    for _ in range(rounds):
        for r in reqs:
            t = time.perf_counter()
            size(r)
            samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {
        "requests": len(reqs),
        "samples": len(samples),
        "p50_ms": statistics.median(samples),
        "p95_ms": samples[int(0.95 * (len(samples) - 1))],
        "max_ms": samples[-1],
    }


def render(eng: dict[str, Any], la: dict[str, Any], lat: dict[str, Any]) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    lines = [
        "## Sizing engine",
        "",
        f"Measured by `python bench/bench_sizing.py` on {machine}; both tools timed in the "
        "same run. A configuration = one (TP, PP, DP, ZeRO stage, recompute, micro-batch) "
        "layout of Llama 2 7B at 4k tokens evaluated to a per-GPU memory estimate "
        f"({len(TPS) * len(PPS) * len(DPS) * len(ZEROS) * len(RECOMPUTES) * len(MBS)} layouts, "
        "cycled). llm-analysis also computes latency per configuration, which is part of its "
        "`training()` call.",
        "",
        "| tool | configurations/s |",
        "|---|---:|",
        f"| app.sizing memory model | {eng['per_second']:,.0f} |",
    ]
    if "per_second" in la:
        lines.append(f"| llm-analysis 0.2.2 (`LLMAnalysis.training`) | {la['per_second']:,.0f} |")
        lines += [
            "",
            f"Ratio: app.sizing is **{eng['per_second'] / la['per_second']:.1f}×** "
            "llm-analysis's rate.",
        ]
        if la.get("errors"):
            lines.append(
                f"(llm-analysis raised on some layouts, counted as evaluated: {la['errors']})"
            )
    else:
        lines += ["", f"llm-analysis could not be timed: {la.get('error')}"]
    lines += [
        "",
        f"Full `size()` search (every SKU, node counts, layouts), {lat['requests']} requests "
        f"(presets from 8B to 671B MoE, 1e9–1e12 tokens, 4k/8k) × {lat['samples'] // lat['requests']}"
        f" rounds: p50 **{lat['p50_ms']:.1f} ms**, p95 **{lat['p95_ms']:.1f} ms**, max "
        f"{lat['max_ms']:.1f} ms (target p95 < 50 ms for live typing).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    seconds = float(os.environ.get("BENCH_SECONDS", "3"))
    eng = bench_engine(seconds)
    la = bench_llm_analysis(seconds)
    lat = bench_latency(int(os.environ.get("BENCH_ROUNDS", "5")))
    text = render(eng, la, lat)
    out = ROOT / "docs" / "benchmarks-sizing.md"
    out.write_text("# Benchmarks: sizing engine\n\n" + text, encoding="utf-8")
    sys.stdout.write(text + f"\nwrote {out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
