"""Time the kernels the throughput model prices, one by one, on one CUDA GPU.

Three families, each timed with CUDA events (3 warm-ups, then the mean of ``--reps``):

* ``mm``: a BF16 GEMM of ``tokens × d`` by ``d × d`` for d from 512 to 16384, and the same
  shape as an FP8 GEMM with one scale per tensor (``torch._scaled_mm``, the call torchao's
  float8 tensorwise recipe makes), so the FP8-over-BF16 gain and the efficiency's fall at
  small widths (``GEMM_HALF_DIM`` in app/sizing/throughput.py) are read on this GPU;
* ``grouped``: routed-expert GEMMs (the up projection, tokens × hidden by hidden × expert
  width, for each local expert) as one grouped GEMM and as a loop of one GEMM per expert,
  at the expert widths of published MoE models and 128-8192 tokens per expert;
* ``attn``: causal flash attention (``scaled_dot_product_attention``), forward and forward
  plus backward, 32 heads of 128, from 2k to 32k tokens.

One JSON object per measurement is printed and appended to ``--out``. FLOPs are the matmul
FLOPs (2·M·N·K; causal attention 2·2·s²·h·d/2 forward, 2.5 times that backward).

Usage (on the GPU machine): ``python3 tools/gpu_memory/kernels.py --out kernels.jsonl``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

# (hidden, expert width) of published MoE configs (config.json of each model):
# Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3, Mixtral 8x7B
EXPERT_SHAPES = {
    "qwen3-30b-a3b": (2048, 768),
    "qwen3-235b-a22b": (4096, 1536),
    "deepseek-v3": (7168, 2048),
    "mixtral-8x7b": (4096, 14336),
}


def timed(fn: Callable[..., object], *args: torch.Tensor, reps: int) -> float:
    """Mean seconds of one call ``fn(*args)``, after three warm-ups."""
    for _ in range(3):
        fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def grouped_mm() -> Callable[..., torch.Tensor] | None:
    """PyTorch's grouped GEMM: the public name where this release has one."""
    public = getattr(F, "grouped_mm", None)
    return public if public is not None else getattr(torch, "_grouped_mm", None)


def expert_loop(x: torch.Tensor, w: torch.Tensor, per_expert: int) -> list[torch.Tensor]:
    """The routed experts' up projection as one GEMM per expert (no grouped kernel)."""
    return [c @ w[i].t() for i, c in enumerate(x.split(per_expert))]


def causal_fwd_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    o.backward(torch.ones_like(o))


def dense(out: list[dict[str, object]], tokens: int, reps: int) -> None:
    dev = torch.device("cuda")
    for d in (512, 1024, 2048, 4096, 8192, 16384):
        a = torch.randn(tokens, d, device=dev, dtype=torch.bfloat16)
        b = torch.randn(d, d, device=dev, dtype=torch.bfloat16)
        flops = 2.0 * tokens * d * d
        s = timed(torch.mm, a, b, reps=reps)
        out.append(
            {
                "kind": "mm",
                "dtype": "bf16",
                "m": tokens,
                "k": d,
                "n": d,
                "s": s,
                "tflops": flops / s / 1e12,
            }
        )
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major, as required
        one = torch.ones((), device=dev)
        for fast in (True, False):
            fp8_mm = partial(
                torch._scaled_mm,
                scale_a=one,
                scale_b=one,
                out_dtype=torch.bfloat16,
                use_fast_accum=fast,
            )
            s8 = timed(fp8_mm, a8, b8, reps=reps)
            out.append(
                {
                    "kind": "mm",
                    "dtype": "fp8-tensorwise",
                    "fast_accum": fast,
                    "m": tokens,
                    "k": d,
                    "n": d,
                    "s": s8,
                    "tflops": flops / s8 / 1e12,
                }
            )
        del a, b, a8, b8


def grouped(out: list[dict[str, object]], reps: int) -> None:
    dev = torch.device("cuda")
    gmm = grouped_mm()
    for model, (hidden, width) in EXPERT_SHAPES.items():
        for experts in (8, 32):
            for per_expert in (128, 512, 2048, 8192):
                if experts * per_expert > 131072:
                    continue
                x = torch.randn(experts * per_expert, hidden, device=dev, dtype=torch.bfloat16)
                w = torch.randn(experts, width, hidden, device=dev, dtype=torch.bfloat16)
                flops = 2.0 * experts * per_expert * hidden * width
                row = {
                    "kind": "grouped",
                    "model": model,
                    "hidden": hidden,
                    "width": width,
                    "experts": experts,
                    "tokens_per_expert": per_expert,
                }
                if gmm is not None:
                    offs = torch.arange(
                        per_expert,
                        experts * per_expert + 1,
                        per_expert,
                        device=dev,
                        dtype=torch.int32,
                    )
                    wt = w.transpose(-2, -1)  # (experts, hidden, width), column-major
                    try:
                        s = timed(partial(gmm, offs=offs), x, wt, reps=reps)
                        row.update(grouped_s=s, grouped_tflops=flops / s / 1e12)
                    except (RuntimeError, TypeError) as e:
                        row["grouped_error"] = f"{type(e).__name__}: {e}"[:200]
                s_loop = timed(partial(expert_loop, per_expert=per_expert), x, w, reps=reps)
                row.update(loop_s=s_loop, loop_tflops=flops / s_loop / 1e12)
                out.append(row)
                del x, w


def attention(out: list[dict[str, object]], reps: int) -> None:
    dev = torch.device("cuda")
    heads, dim = 32, 128
    for seq in (2048, 4096, 8192, 16384, 32768):
        q, k, v = (
            torch.randn(1, heads, seq, dim, device=dev, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        fwd_flops = 2.0 * 2.0 * seq * seq * heads * dim / 2.0  # causal: half the square
        s_f = timed(partial(F.scaled_dot_product_attention, is_causal=True), q, k, v, reps=reps)
        s_fb = timed(causal_fwd_bwd, q, k, v, reps=reps)
        out.append(
            {
                "kind": "attn",
                "seq": seq,
                "heads": heads,
                "head_dim": dim,
                "fwd_s": s_f,
                "fwd_tflops": fwd_flops / s_f / 1e12,
                "fwd_bwd_s": s_fb,
                "fwd_bwd_tflops": 3.5 * fwd_flops / s_fb / 1e12,
            }
        )
        del q, k, v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=8192, help="rows of the dense GEMMs")
    args = ap.parse_args()
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    t0 = time.perf_counter()
    for family in (dense, grouped, attention):
        rows: list[dict[str, object]] = []
        try:
            if family is dense:
                dense(rows, args.tokens, args.reps)
            else:
                family(rows, args.reps)
        except Exception as e:  # noqa: BLE001 - keep what was measured, note the failure
            rows.append({"kind": family.__name__, "error": f"{type(e).__name__}: {e}"[:400]})
        with open(args.out, "a", encoding="utf-8") as f:
            for row in rows:
                row.update(env)
                line = json.dumps(
                    {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}
                )
                print(line, flush=True)
                f.write(line + "\n")
        torch.cuda.empty_cache()
    print(f"kernels: {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
