"""`make bench`: run every benchmark and write docs/benchmarks.md.

Every figure is a ratio against a baseline measured in the same command on the same
machine. Sections:
  1. the live sizing fragment vs GET /healthz           (bench/bench_http.py, bench/loadgen.py)
  2. the sizing search over the full grid               (bench/bench_search.py)
  3. checkouts/s on PostgreSQL (4 processes) vs pgbench TPC-B, and SQLite (bench/bench_checkout.py)
  4. the sizing engine vs llm-analysis 0.2.2            (bench/bench_sizing.py)
  5. ledger operations vs a one-row write               (bench/bench_ledger.py)
  6. page weight and Lighthouse scores                  (scripts/lighthouse.py)

The three headline figures (fragment ÷ /healthz, search p95/max, checkouts ÷ pgbench) are
appended to bench/history.csv and shown as a history table at the top of the document.

    make bench            # or: .venv/bin/python -m bench.run_all [--skip lighthouse,...]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

from bench.common import ROOT, machine

DOCS = ROOT / "docs"
HISTORY = ROOT / "bench" / "history.csv"
HISTORY_FIELDS = (
    "date",
    "commit",
    "fragment_x_healthz",
    "search_p95_ms",
    "search_max_ms",
    "checkout_x_pgbench",
    "python_ref_ms",  # the machine's speed in the run (bench.common.python_speed_ms)
    "note",
)
HEADLINE: dict[str, Any] = {}


def _sizing() -> str:
    subprocess.run([sys.executable, "bench/bench_sizing.py"], cwd=ROOT, check=True)  # noqa: S603
    text = (DOCS / "benchmarks-sizing.md").read_text(encoding="utf-8")
    return text.replace(
        "# Benchmarks: sizing engine\n\n## Sizing engine",
        "## The sizing engine vs llm-analysis 0.2.2",
        1,
    )


def _ledger() -> str:
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "bench.bench_ledger", "-n", "1000"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    body = out.replace("# Ledger operations", "## Ledger operations", 1)
    return body + "\nReproduce: `.venv/bin/python -m bench.bench_ledger`\n"


def _http() -> str:
    from bench import bench_http

    loads, note, where = bench_http.run()
    base, frag = loads[0], loads[1]
    HEADLINE["fragment_x_healthz"] = f"{frag.rps / base.rps:.3f}" if base.rps else ""
    return bench_http.report(loads, note, where)


def _search() -> str:
    from bench import bench_search

    # in a fresh process, as a server worker answers it: the HTTP bench's objects in this
    # process would make every garbage collection inside the timed search slower
    out = subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-c",
            "import json; from bench import bench_search; print(json.dumps(bench_search.run()))",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    HEADLINE["search_p95_ms"] = f"{r['p95_ms']:.1f}"
    HEADLINE["search_max_ms"] = f"{r['max_ms']:.1f}"
    HEADLINE["python_ref_ms"] = f"{min(r['python_ref_ms']):.1f}"
    return bench_search.report(r)


def _checkout() -> str:
    from bench import bench_checkout

    rates, prof, where = bench_checkout.run()
    HEADLINE["checkout_x_pgbench"] = f"{rates[0].per_second / rates[1].per_second:.3f}"
    return bench_checkout.report(rates, prof, where)


def _commit() -> str:
    out = subprocess.run(  # noqa: S603
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,  # noqa: S607
    )
    return out.stdout.strip()


def _history(note: str) -> str:
    rows: list[dict[str, str]] = []
    if HISTORY.exists():
        with HISTORY.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    if HEADLINE:
        rows.append(
            {
                "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
                "commit": _commit(),
                # the figures: every field between the commit and the note
                **{k: str(HEADLINE.get(k, "")) for k in HISTORY_FIELDS[2:-1]},
                "note": note,
            }
        )
        with HISTORY.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=HISTORY_FIELDS, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    lines = [
        "## History of the headline ratios",
        "",
        "From `bench/history.csv` (one row per `make bench`; goals: fragment ≥ 0.5× `/healthz` on "
        "distinct requests, search p95 ≤ 20 ms and max ≤ 50 ms, checkout ≥ 0.10× pgbench). "
        "`python ref ms`: CPU ms of a fixed pure-Python yardstick in the same run, the lower "
        "of its readings before and after the search grid (`bench.common.python_speed_ms`, "
        "from 2026-12-01 19:05): the machine's speed, which the search's milliseconds follow.",
        "",
        "| date (UTC) | commit | fragment ÷ /healthz | search p95 ms | search max ms "
        "| checkout ÷ pgbench | python ref ms | note |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(r.get(k, "") or "–" for k in HISTORY_FIELDS) + " |")
    return "\n".join(lines) + "\n"


def _lighthouse() -> str:
    subprocess.run(  # noqa: S603
        [sys.executable, "scripts/lighthouse.py", "--simulation", "on"], cwd=ROOT, check=False
    )
    text = (DOCS / "benchmarks-lighthouse.md").read_text(encoding="utf-8")
    return text.replace(
        "# Lighthouse: the pages a customer sees", "## Page weight and Lighthouse", 1
    )


SECTIONS = {
    "http": _http,
    "search": _search,
    "checkout": _checkout,
    "sizing": _sizing,
    "ledger": _ledger,
    "lighthouse": _lighthouse,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument(
        "--skip", default="", help="comma-separated sections to skip: " + ",".join(SECTIONS)
    )
    ap.add_argument("--note", default="", help="a note for this run's row in the history")
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    parts: list[str] = []
    head = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`.venv/bin/python -m bench.run_all`); do not edit by hand. "
        "Every figure is a ratio against a baseline measured in the same run on the same machine "
        f"({machine()}). Absolute numbers move with the machine; the ratios are the point.",
        "",
        "Hand-measured before/after comparisons of each change (old and new code back to back, "
        "CPU time where the shared machine made wall-clock figures move) live in "
        "`docs/benchmarks-ab.md`, which a run does not overwrite.",
        "",
    ]
    for name, fn in SECTIONS.items():
        if name in skip:
            extra = (
                " Lighthouse runs separately (`make lighthouse`: 13 pages × EN/ZH × mobile/desktop): see "
                "`docs/benchmarks-lighthouse.md`."
                if name == "lighthouse"
                else ""
            )
            parts += [f"## {name}", "", "_Skipped in this run._" + extra, ""]
            continue
        print(f"== {name}", flush=True)
        try:
            parts += [fn(), ""]
        except Exception as e:  # noqa: BLE001 - report the failure in the document, go on
            parts += [f"## {name}", "", f"_Failed in this run: {e.__class__.__name__}: {e}_", ""]
    text = "\n".join([*head, _history(args.note), *parts])
    (DOCS / "benchmarks.md").write_text(text, encoding="utf-8")
    print(f"wrote {DOCS / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
