"""Dump the engine's answer over the bench_search grid to JSON, or compare with a dump.

Used to check that speeding up the search leaves every answer as it was:

    python -m bench.search_golden dump /tmp/before.json
    python -m bench.search_golden compare /tmp/before.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.bench_search import grid


def answers() -> dict[str, Any]:
    from app import sizing
    from app.sizing import engine

    out: dict[str, Any] = {}
    for r in grid():
        key = f"{r['model']['preset']}|{r['seq_len']}|{r['tokens']:g}"
        engine.cache_clear()
        try:
            a = sizing.size(r)
        except Exception as e:  # noqa: BLE001 - a refusal is an answer
            out[key] = {"error": type(e).__name__, "msg": str(e)}
            continue
        out[key] = a
    return out


def main() -> int:
    cmd, path = sys.argv[1], sys.argv[2]
    got = answers()
    if cmd == "dump":
        with open(path, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True, default=str)
        print(f"{len(got)} answers written to {path}")
        return 0
    with open(path) as f:
        want = json.load(f)
    got = json.loads(json.dumps(got, sort_keys=True, default=str))
    diff = [k for k in want if want[k] != got.get(k)]
    for k in diff[:20]:
        print("DIFF", k)
    print(f"{len(want) - len(diff)}/{len(want)} identical")
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
