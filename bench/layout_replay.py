"""The public throughput cases asked the way a customer asks: the engine picks the layout.

``bench.throughput_accuracy`` predicts each public run under the run's own layout (TP, PP,
EP, CP, sharding, recompute, batch). A customer does not send a layout: ``/size`` searches
one. This replay asks ``app.sizing.engine.size`` for each public run on a node the catalog
sells (H100, H200, B200, B300, MI355X; the GB300 rack by whole racks), with only what the
customer knows — the model, framework, precision, sequence length, node count and
micro-batch — and compares the speed the engine promises for the layout it chose with the
speed the run measured under its tuned layout. A positive error means the engine promises
more than the published run reached.

    PYTHONPATH=$PWD .venv/bin/python -m bench.layout_replay [-v]

It reads the same data as ``bench.throughput_accuracy`` and writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from app.catalog.specs import all_specs
from app.sizing.engine import size
from app.sizing.errors import SizingError
from app.sizing.params import count
from bench.throughput_accuracy import (
    FRAMEWORK_OF_GROUP,
    _arch_from,
    _public_sets,
    model_flops_per_token,
)

# the GPU a public run names → the catalog node that carries it
NODE_OF_GPU = {
    "H100": "hgx-h100",
    "H200": "hgx-h200",
    "B200": "hgx-b200",
    "B300": "hgx-b300",
    "MI355X": "mi355x",
    "GB300": "gb300-nvl72",
}


def _arch_spec(d: dict[str, Any]) -> dict[str, Any]:
    """A public set's architecture entry as the request's ``model`` object."""
    if "preset" in d:
        return {"preset": d["preset"]}
    keys = (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_layers",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "tie_embeddings",
        "qk_norm",
    )
    arch = {k: d[k] for k in keys if k in d}
    if d.get("moe"):
        arch["moe"] = dict(d["moe"])
    if d.get("mla"):
        arch["mla"] = dict(d["mla"])
    return {"architecture": arch}


def ask(c: dict[str, Any], archs: dict[str, Any]) -> dict[str, Any] | None:
    sku = NODE_OF_GPU.get(str(c["gpu"]))
    if sku is None:
        return None
    per_node = {s.id: s.gpus_per_node for s in all_specs()}[sku]
    n = int(c["num_gpus"])
    if n % per_node:
        return None
    framework = FRAMEWORK_OF_GROUP[c["group"]][0]
    req = {
        "model": _arch_spec(archs[c["model"]]),
        "tokens": 1e12,
        "seq_len": int(c["seq_len"]),
        "precision": str(c["precision"]),
        "method": "lora" if c.get("method") == "lora" else "full",
        "framework": framework,
        "nodes": n // per_node,
        "sku": sku,
        "micro_batch_size": int(c["micro_batch_size"]),
        "rocm_ok": True,
    }
    if framework == "fsdp2" and "compile" in str(c["source"].get("how_read", "")):
        req["compile"] = True
    row = {
        "id": c["id"],
        "group": c["group"],
        "framework": framework,
        "gpu": c["gpu"],
        "precision": c["precision"],
        "world": n,
    }
    try:
        out = size(req)
    except SizingError as e:
        return {**row, "answered": False, "why": str(e)}
    o = out["options"][0] if out.get("options") else None
    metric = next(iter(c["measured"]))
    measured = float(c["measured"][metric])
    if o is None or not o.get("fits") or not o.get("predicted_tokens_per_s_per_gpu"):
        return {**row, "answered": False, "why": "no fitting option"}
    tok = float(o["predicted_tokens_per_s_per_gpu"])
    arch = _arch_from(archs[c["model"]])
    if metric == "tokens_per_sec_per_gpu":
        pred = tok
    elif metric == "model_tflops_per_gpu":
        pred = tok * model_flops_per_token(arch, count(arch), int(c["seq_len"])) / 1e12
    else:
        return None
    lay = o["layout"]
    p = c["parallelism"]
    return {
        **row,
        "answered": True,
        "measured": measured,
        "predicted": pred,
        "error_pct": 100 * (pred - measured) / measured,
        "engine_layout": f"{lay['sharding']} tp{lay['tp']} pp{lay['pp']} ep{lay['ep']} cp{lay['cp']}"
        f" rc={lay['recompute']} off={int(bool(lay['offload_optimizer']))}",
        "run_layout": f"{c['sharding']} tp{p['tp']} pp{p['pp']} ep{p['ep']} cp{p['cp']}"
        f" rc={c['recompute']}",
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| framework | cases | answered | median abs error | median signed error | within ±25 % |",
        "|---|---|---|---|---|---|",
    ]
    for fw in sorted({r["framework"] for r in rows}):
        mine = [r for r in rows if r["framework"] == fw]
        ok = [r for r in mine if r["answered"]]
        errs = [abs(r["error_pct"]) for r in ok]
        out.append(
            f"| {fw} | {len(mine)} | {len(ok)} | {statistics.median(errs):.1f} % | "
            f"{statistics.median(r['error_pct'] for r in ok):+.1f} % | "
            f"{sum(e <= 25 for e in errs)}/{len(ok)} |"
        )
    out += ["", "| case | error | engine's layout | the run's layout |", "|---|---|---|---|"]
    for r in rows:
        if r["answered"]:
            out.append(
                f"| {r['id']} | {r['error_pct']:+.1f} % | {r['engine_layout']} | "
                f"{r['run_layout']} |"
            )
        else:
            out.append(f"| {r['id']} | not answered: {r['why']} | | |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-v", action="store_true", help="one line per case")
    ap.add_argument("--markdown", action="store_true", help="the tables docs/sizing.md quotes")
    args = ap.parse_args(argv)
    public = _public_sets()
    rows = [r for c in public["measured_cases"] if (r := ask(c, public["architectures"]))]
    if args.markdown:
        print(markdown(rows))
        return 0
    if args.v:
        for r in rows:
            if r["answered"]:
                print(
                    f"{r['id']:48s} {r['error_pct']:+6.1f} %  engine {r['engine_layout']:38s}"
                    f" run {r['run_layout']}"
                )
            else:
                print(f"{r['id']:48s} not answered: {r['why']}")
    for fw in sorted({r["framework"] for r in rows}):
        mine = [r for r in rows if r["framework"] == fw]
        ok = [r for r in mine if r["answered"]]
        errs = [abs(r["error_pct"]) for r in ok]
        signed = [r["error_pct"] for r in ok]
        within = sum(e <= 25 for e in errs)
        print(
            f"{fw:9s} cases {len(mine):3d} answered {len(ok):3d}  median |err| "
            f"{statistics.median(errs):5.1f} %  median signed {statistics.median(signed):+5.1f} %"
            f"  within ±25 % {within}/{len(ok)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
