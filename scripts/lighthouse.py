"""Lighthouse 12.2.3 on /size and /deploy, reported in docs/benchmarks-lighthouse.md.

Starts the app on a free loopback port with a fresh, seeded SQLite database in a
temporary folder, runs the pinned Lighthouse (``tools/lighthouse``, ``npm ci`` there
first) with Debian's Chromium, and writes the scores and every audit that did not pass.

    (cd tools/lighthouse && npm install)   # once
    .venv/bin/python scripts/lighthouse.py [--out docs/benchmarks-lighthouse.md]

Targets (issue 8): performance >= 95, accessibility 100, best practices 100. Exit code 1
when a page misses a target.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LH_DIR = ROOT / "tools" / "lighthouse"
LH_CLI = LH_DIR / "node_modules" / "lighthouse" / "cli" / "index.js"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
PAGES = [
    ("/size", "en", "/size (default job, results rendered)"),
    ("/size", "zh_CN", "/size in Chinese"),
    ("/deploy", "en", "/deploy"),
    (
        "/deploy?sku=hgx-b200&nodes=2&note_model_size=70.6B+params&note_token_budget=1T+tokens"
        "&note_node_count=2&note_private_network=1&note_comm_pattern=FSDP&sizing=model%3Dllama-3.1-70b",
        "en",
        "/deploy from “Use this”",
    ),
]
TARGETS = {"performance": 95, "accessibility": 100, "best-practices": 100}
FORMS = ("mobile", "desktop")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app(tmp: Path, simulation: bool) -> tuple[subprocess.Popen[bytes], str]:
    db = f"sqlite:///{tmp / f'lighthouse-{simulation}.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APP_")}
    env.update(
        {
            "DATABASE_URL": db,
            "APP_DATABASE_URL": db,
            "APP_ENVIRONMENT": "test",
            "APP_SECRET_KEY": "lighthouse-secret-key-that-is-long-enough-0123456789",
            "APP_WEBHOOK_SECRET": "lighthouse-webhook-secret",
            "APP_SIMULATION": "true" if simulation else "false",
            "APP_LOG_LEVEL": "WARNING",
        }
    )
    py = sys.executable
    sys.path.insert(0, str(ROOT))
    from app.migrate import upgrade

    upgrade(db)
    seed = subprocess.run(  # noqa: S603
        [py, "-m", "app", "seed"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if seed.returncode != 0:
        print("seeding failed (continuing):", seed.stderr[-1500:], file=sys.stderr)
    port = free_port()
    log = (tmp / "app.log").open("wb")
    proc = subprocess.Popen(  # noqa: S603
        [py, "-m", "uvicorn", "--factory", "app.main:asgi", "--host", "127.0.0.1"]
        + ["--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1) as r:  # noqa: S310
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(f"app did not start; see {tmp / 'app.log'}")


def run_lighthouse(url: str, lang: str, form: str, out: Path) -> dict:
    cmd = [
        "node",
        str(LH_CLI),
        url,
        "--quiet",
        "--output=json",
        f"--output-path={out}",
        "--only-categories=performance,accessibility,best-practices",
        "--chrome-flags=--headless=new --no-sandbox --disable-gpu",
        f"--extra-headers={json.dumps({'Cookie': f'lang={lang}'})}",
    ]
    if form == "desktop":
        cmd.append("--preset=desktop")
    env = dict(os.environ, CHROME_PATH=CHROME)
    subprocess.run(cmd, check=True, env=env, cwd=LH_DIR, timeout=240)  # noqa: S603
    return json.loads(out.read_text())


def _status(url: str, lang: str) -> int | str:
    req = urllib.request.Request(url, headers={"Cookie": f"lang={lang}"})  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError as e:
        return type(e).__name__


def failing_audits(report: dict, category: str) -> list[str]:
    out = []
    for ref in report["categories"][category]["auditRefs"]:
        a = report["audits"][ref["id"]]
        score = a.get("score")
        if ref.get("weight", 0) == 0 and category != "accessibility":
            continue
        if score is not None and score < 1 and a.get("scoreDisplayMode") in ("binary", "numeric"):
            out.append(f"{a['id']} ({a['title']}: {a.get('displayValue') or score})")
    return out


def _run_all(
    tmp: Path, sim: bool, forms: tuple[str, ...], rows: list[str], details: list[str]
) -> bool:
    """Lighthouse every page in every form factor against one app process."""
    ok = True
    simtxt = "on" if sim else "off"
    proc, base = start_app(tmp, sim)
    try:
        for path, lang, label in PAGES:
            for form in forms:
                try:
                    rep = run_lighthouse(base + path, lang, form, tmp / "report.json")
                except (subprocess.SubprocessError, OSError, ValueError) as e:
                    ok = False
                    status = _status(base + path, lang)
                    rows.append(
                        f"| {label} | {lang} | {form} | {simtxt} | – | – | – | – | – | – | "
                        f"❌ Lighthouse could not load the page (HTTP {status}) |"
                    )
                    log_tail = (tmp / "app.log").read_text(errors="replace")[-1500:]
                    details.append(
                        f"### {label} ({lang}, {form}, simulation {simtxt})\n\nLighthouse failed: "
                        f"{type(e).__name__}; the page answered HTTP {status}.\n\n"
                        f"```\n{log_tail.strip()}\n```"
                    )
                    print(rows[-1], flush=True)
                    continue
                cats = rep["categories"]
                scores = {k: round((cats[k]["score"] or 0) * 100) for k in TARGETS}
                miss = [k for k, v in scores.items() if v < TARGETS[k]]
                ok &= not miss
                kb = rep["audits"]["total-byte-weight"]["numericValue"] / 1024
                lcp = rep["audits"]["largest-contentful-paint"]["numericValue"]
                cls = rep["audits"]["cumulative-layout-shift"]["numericValue"]
                rows.append(
                    f"| {label} | {lang} | {form} | {simtxt} | {scores['performance']} | "
                    f"{scores['accessibility']} | {scores['best-practices']} | "
                    f"{kb:.1f} KB | {lcp / 1000:.2f} s | {cls:.3f} | "
                    f"{'✅' if not miss else '❌ ' + ', '.join(miss)} |"
                )
                fails = [
                    f"- **{k}**: " + "; ".join(failing_audits(rep, k))
                    for k in TARGETS
                    if failing_audits(rep, k) and (k != "performance" or miss)
                ]
                if fails:
                    details.append(
                        f"### {label} ({lang}, {form}, simulation {simtxt})\n\n" + "\n".join(fails)
                    )
                print(rows[-1], flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-lighthouse.md"))
    ap.add_argument("--form", choices=(*FORMS, "both"), default="both")
    ap.add_argument(
        "--simulation",
        choices=("on", "off", "both"),
        default="both",
        help="APP_SIMULATION for the app under test (on: the simulated clock)",
    )
    args = ap.parse_args()
    if not LH_CLI.exists():
        print("run `npm install` in tools/lighthouse first", file=sys.stderr)
        return 2
    forms = FORMS if args.form == "both" else (args.form,)
    version = json.loads((LH_CLI.parents[1] / "package.json").read_text())["version"]
    chrome_v = subprocess.run([CHROME, "--version"], capture_output=True, text=True).stdout.strip()  # noqa: S603
    rows: list[str] = []
    details: list[str] = []
    ok = True
    sims = {"on": (True,), "off": (False,), "both": (True, False)}[args.simulation]
    with tempfile.TemporaryDirectory(prefix="lighthouse-") as t:
        tmp = Path(t)
        for sim in sims:
            ok &= _run_all(tmp, sim, forms, rows, details)
    text = [
        "# Lighthouse: /size and /deploy",
        "",
        "Generated by `scripts/lighthouse.py` (do not edit by hand). The script starts the",
        "app on a free loopback port with a fresh seeded SQLite database, then runs",
        f"Lighthouse {version} (npm, pinned in `tools/lighthouse/package.json`) with",
        f"{chrome_v or CHROME} (`--headless=new --no-sandbox`). Mobile uses Lighthouse's",
        "default simulated throttling (slow 4G, 4× CPU); desktop uses `--preset=desktop`.",
        "",
        "App settings: SQLite; each page is measured with `APP_SIMULATION` on (the",
        "simulated clock, as the demo runs) and off.",
        "",
        "Targets (issue 8): performance ≥ 95, accessibility 100, best practices 100.",
        "Transfer is Lighthouse's total byte weight (compressed as sent).",
        "",
        "| page | lang | form | simulation | performance | accessibility | best practices "
        "| transfer | LCP | CLS | targets |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        "## Audits that did not pass",
        "",
        *(details or ["None."]),
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
