"""Benchmark: ``capture-trace summary`` against HTA's TraceAnalysis load and plain ``json.loads``.

Why this shape: the analyzer's promise is relative (<= 1/5 of HTA's load time, <= 1/3 of json.loads'
peak RSS), so all rows are measured in one run on the same ~500k-event capture-style trace and
printed side by side with ratios. Each measurement runs in its own process; its peak RSS is that
process's own maximum resident set (``os.wait4`` rusage), so rows cannot contaminate each other.

    python benchmarks/bench_analyze.py [--events 500000] [--cache /tmp/capture-trace-bench]
                                       [--hta-python /path/to/venv/bin/python] [--repeat 1]

The trace is generated once with torch.profiler (record_shapes=True, ``capture::bs=N`` ranges) and
cached. HTA is a benchmark-only extra: without it that row says "HTA not installed".
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE_NAME = "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz"

GENERATE = textwrap.dedent(
    """
    import sys, torch
    from torch.profiler import ProfilerActivity, profile, record_function
    target, out = int(sys.argv[1]), sys.argv[2]
    lin = torch.nn.Linear(16, 16)
    def forward(x):
        for _ in range(4):
            x = torch.relu(lin(x)) + x * 0.5
        return x.sum()
    sizes = [1, 2, 4, 8, 16, 24, 32, 48, 64]
    per = max(1, target // (len(sizes) * 76))  # ~76 events per forward with record_shapes
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for bs in sizes:
            with record_function(f"capture::bs={bs}"):
                x = torch.randn(bs, 16)
                for _ in range(per):
                    forward(x)
    prof.export_chrome_trace(out)
    """
)

# Each child prints one JSON line: {"seconds": ..., "events": ...}; RSS comes from wait4.
CHILD = {
    "gunzip": """
        import gzip, sys, time
        t = time.perf_counter(); n = 0
        with gzip.open(sys.argv[1]) as f:
            while (b := f.read(1 << 20)):
                n += len(b)
        print(json.dumps({"seconds": time.perf_counter() - t, "events": None}))
    """,
    "json.loads": """
        import gzip, sys, time
        t = time.perf_counter()
        with gzip.open(sys.argv[1]) as f:
            doc = json.loads(f.read())
        print(json.dumps({"seconds": time.perf_counter() - t, "events": len(doc["traceEvents"])}))
    """,
    "hta": """
        import logging, os, sys, time
        logging.disable(logging.CRITICAL)
        try:
            from hta.trace_analysis import TraceAnalysis
        except ImportError:
            print(json.dumps({"missing": True})); sys.exit(0)
        t = time.perf_counter()
        ta = TraceAnalysis(trace_dir=os.path.dirname(sys.argv[1]))
        n = sum(len(df) for df in ta.t.traces.values())
        print(json.dumps({"seconds": time.perf_counter() - t, "events": n}))
    """,
    "summary": """
        import sys, time
        t = time.perf_counter()
        from mixins.analysis.model.records import load_record, summarize
        s = summarize(load_record(sys.argv[1]), 10)
        json.dumps(s)
        print(json.dumps({"seconds": time.perf_counter() - t, "events": s["events"]}))
    """,
}


def generate(events: int, cache: Path) -> Path:
    """Write the benchmark trace once (plain JSON export, then gzip in 1 MiB chunks)."""
    trace_dir = cache / f"trace-{events}"
    path = trace_dir / TRACE_NAME
    if path.exists():
        return path
    trace_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        print(
            f"generating a ~{events:,}-event trace (torch.profiler, once; cached in {cache}) ...", flush=True
        )
        subprocess.run(
            [sys.executable, "-c", GENERATE, str(events), str(raw)], check=True, stderr=subprocess.DEVNULL
        )
        part = path.with_name("." + path.name + ".tmp")
        with open(raw, "rb") as src, gzip.open(part, "wb", compresslevel=6) as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.replace(part, path)
    return path


_PYCACHE = tempfile.TemporaryDirectory(prefix="bench-pycache-")


def child_env() -> dict[str, str]:
    """A measured child's environment: this checkout first on the path, and bytecode cached as an
    installed package has it (pip compiles at install time): PYTHONDONTWRITEBYTECODE dropped, a private
    PYTHONPYCACHEPREFIX, so only a run's first child compiles our sources (~100 ms); best-of-N runs
    fill it before they measure."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONPYCACHEPREFIX=_PYCACHE.name)
    return env


def measure(kind: str, trace: Path, python: str) -> dict[str, Any]:
    """Run one measurement in a fresh process; add its own peak RSS (MiB)."""
    code = "import json\n" + textwrap.dedent(CHILD[kind])
    env = child_env()
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            [python, "-c", code, str(trace)], stdout=subprocess.PIPE, stderr=err_file, env=env, cwd=ROOT
        )
        assert proc.stdout is not None
        out = proc.stdout.read()  # to EOF; then reap it ourselves to get this child's own rusage
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code_rc = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        err = err_file.read()
    if code_rc != 0:
        raise RuntimeError(f"{kind} failed ({code_rc}):\n{err.decode(errors='replace')[-2000:]}")
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["rss_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    res["cpu_s"] = usage.ru_utime + usage.ru_stime  # the child's own CPU time: steadier than wall on a loaded machine
    return res


def _hta_python(arg: str | None) -> str:
    if arg:
        return arg
    env = os.environ.get("CAPTURE_TRACE_HTA_PYTHON")
    return env or sys.executable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=500_000)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "capture-trace-bench"))
    ap.add_argument(
        "--hta-python",
        help="python with HolisticTraceAnalysis (default: $CAPTURE_TRACE_HTA_PYTHON or this one)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the best time and RSS are kept")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = ap.parse_args()

    trace = generate(args.events, Path(args.cache))
    size = trace.stat().st_size
    rows: dict[str, dict[str, Any]] = {}
    for kind, python in (
        ("gunzip", sys.executable),
        ("json.loads", sys.executable),
        ("hta", _hta_python(args.hta_python)),
        ("summary", sys.executable),
    ):
        best: dict[str, Any] | None = None
        for _ in range(max(1, args.repeat)):
            res = measure(kind, trace, python)
            if res.get("missing"):
                best = res
                break
            if best is None or float(res["seconds"]) < float(best["seconds"]):
                best = res
        assert best is not None
        rows[kind] = best
        print(f"  measured {kind}", flush=True)

    ours = rows["summary"]
    events = ours["events"]
    labels = {
        "gunzip": "gunzip only (reference)",
        "json.loads": "json.loads (stdlib)",
        "hta": "HTA TraceAnalysis load",
        "summary": "capture-trace summary",
    }
    print(f"\ntrace: {trace} ({size / 2**20:.1f} MiB gzip, {events:,} events)\n")
    print(f"{'what':<28} {'seconds':>9} {'peak RSS MiB':>13} {'time / ours':>12} {'RSS / ours':>11}")
    for kind, r in rows.items():
        if r.get("missing"):
            print(f"{labels[kind]:<28} {'HTA not installed':>36}")
            continue
        sec, rss = float(r["seconds"]), float(r["rss_mib"])
        print(
            f"{labels[kind]:<28} {sec:>9.2f} {rss:>13.0f} {sec / float(ours['seconds']):>11.1f}x "
            f"{rss / float(ours['rss_mib']):>10.1f}x"
        )
    print()
    if not rows["hta"].get("missing"):
        ratio = float(ours["seconds"]) / float(rows["hta"]["seconds"])
        print(f"summary time / HTA load time     = {ratio:.3f}  (goal <= 0.200)")
    rss_ratio = float(ours["rss_mib"]) / float(rows["json.loads"]["rss_mib"])
    print(f"summary peak RSS / json.loads's  = {rss_ratio:.3f}  (goal <= 0.333)")
    if args.json:
        print(json.dumps({"trace": str(trace), "size": size, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
