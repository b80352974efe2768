"""``python -m app.sizing [FILE]``: JSON request from FILE or stdin, JSON answer on stdout.

Friendlier flags build (or override) the request: ``--preset llama-3.1-8b --tokens 1e12``.
Bad input exits with status 2 and the errors on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.sizing.engine import list_presets, size
from app.sizing.errors import SizingError
from app.sizing.launch import cli as launch_cli
from app.sizing.messages import Msg, Translate, translator

FLAG_FIELDS = (
    ("tokens", float),
    ("seq_len", int),
    ("micro_batch_size", int),
    ("method", str),
    ("precision", str),
    ("optimizer", str),
    ("grad_dtype", str),
    ("recompute", str),
    ("sku", str),
    ("nodes", int),
    ("mfu", float),
    ("lora_rank", int),
    ("max_days", float),
    ("rocm_ok", bool),
    ("framework", str),
    ("compile", bool),
    ("pp_schedule", str),
    ("virtual_stages", int),
    ("num_microbatches", int),
    ("global_batch_size", int),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app.sizing",
        description="Size an LLM training job on the catalog's GPU nodes. Reads a JSON request "
        "from FILE (or stdin when no FILE and no --preset/--params), writes the JSON answer.",
        epilog="example: python -m app.sizing --preset llama-3.1-70b --tokens 2e11 --seq-len 8192",
    )
    p.add_argument("file", nargs="?", help="JSON request file ('-' for stdin)")
    p.add_argument("--preset", help="model preset id (see --list-presets)")
    p.add_argument("--params", type=float, help="bare parameter count, e.g. 7e9")
    p.add_argument("--tokens", type=float, help="training tokens, e.g. 1e12")
    p.add_argument("--seq-len", dest="seq_len", type=int, help="sequence length (default 4096)")
    p.add_argument("--micro-batch-size", "--mbs", dest="micro_batch_size", type=int)
    p.add_argument("--method", choices=["full", "lora", "qlora"])
    p.add_argument("--precision", choices=["bf16", "fp8", "fp4"])
    p.add_argument("--optimizer", choices=["adamw", "adamw8bit"])
    p.add_argument("--grad-dtype", dest="grad_dtype", choices=["bf16", "fp32"])
    p.add_argument("--recompute", choices=["none", "selective", "full"])
    p.add_argument("--sku", help="evaluate one SKU only (e.g. hgx-b200)")
    p.add_argument("--nodes", type=int, help="fix the node count")
    p.add_argument("--mfu", type=float, help="model FLOPs utilisation, 0 < mfu <= 1")
    p.add_argument("--lora-rank", dest="lora_rank", type=int)
    p.add_argument("--max-days", dest="max_days", type=float, help="deadline in days")
    p.add_argument(
        "--rocm-ok",
        dest="rocm_ok",
        action="store_true",
        default=None,
        help="the training stack already runs on ROCm (AMD nodes may be recommended)",
    )
    p.add_argument(
        "--framework",
        choices=["megatron", "fsdp2", "deepspeed", "hf"],
        help="training stack whose memory layout to assume (default fsdp2)",
    )
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile")
    p.add_argument("--pp-schedule", dest="pp_schedule", choices=["1f1b", "interleaved", "gpipe"])
    p.add_argument("--virtual-stages", dest="virtual_stages", type=int)
    p.add_argument("--num-microbatches", dest="num_microbatches", type=int)
    p.add_argument("--global-batch-size", dest="global_batch_size", type=int)
    p.add_argument("--lang", default="en", help="language of the prose: en (default), zh_CN")
    p.add_argument("--list-presets", action="store_true", help="print the presets and exit")
    p.add_argument("--indent", type=int, default=2, help="JSON indent (0 for one line)")
    p.add_argument("--launch", choices=launch_cli.CHOICES, help="launch files for an option")
    p.add_argument("--option", type=int, default=0, help="the option --launch exports")
    p.add_argument("--out", help="--launch: also write the files into this folder")
    return p


def _fail(errors: list[tuple[str, Msg]], tr: Translate) -> int:
    out = SizingError.many(errors).as_dict(tr)
    json.dump(out, sys.stderr, ensure_ascii=False)
    sys.stderr.write("\n")
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tr = translator(args.lang)
    indent = args.indent or None
    if args.list_presets:
        json.dump(list_presets(), sys.stdout, indent=indent)
        sys.stdout.write("\n")
        return 0
    req: dict[str, Any] = {}
    use_stdin = args.file == "-" or (args.file is None and not (args.preset or args.params))
    if args.file and args.file != "-" or use_stdin:
        try:
            if use_stdin:
                text = sys.stdin.read()
            else:
                with open(args.file, encoding="utf-8") as fh:
                    text = fh.read()
            loaded = json.loads(text)
        except OSError as e:
            return _file_error(e)
        except json.JSONDecodeError:
            return _fail([("request", Msg("request.not_json"))], tr)
        if not isinstance(loaded, dict):
            return _fail([("request", Msg("request.not_object"))], tr)
        req = loaded
    if args.preset:
        req["model"] = {"preset": args.preset}
    elif args.params:
        req["model"] = {"params": args.params}
    for name, _typ in FLAG_FIELDS:
        val = getattr(args, name)
        if val is not None:
            req[name] = val
    if args.launch:
        return launch_cli.emit(req, args.option, args.launch, args.out)
    try:
        out = size(req, translate=tr)
    except SizingError as e:
        return _fail(e.codes, tr)
    json.dump(out, sys.stdout, indent=indent, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _file_error(e: OSError) -> int:
    json.dump({"errors": [{"field": "file", "message": str(e), "code": "file"}]}, sys.stderr)
    sys.stderr.write("\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
