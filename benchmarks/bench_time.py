"""Benchmark: ``capture-trace time`` against ``summary`` and plain ``json.loads`` on the same trace.

Why these anchors: ``time`` promises the analyzer's streaming reader and bounded memory, so its cost
is shown next to ``summary`` (the same reader) and ``json.loads`` (what a script would do), each in
its own process with its own peak RSS. The trace and the measuring harness are ``bench_analyze``'s.

    python benchmarks/bench_time.py [--events 500000] [--cache /tmp/capture-trace-bench] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_analyze  # noqa: E402 - the sibling benchmark: trace generation and per-process measuring

bench_analyze.CHILD["time"] = """
    import sys, time
    t = time.perf_counter()
    from mixins.analysis.serialise import to_json
    from mixins.analysis.commands.time import time_trace
    doc = to_json(time_trace(sys.argv[1], 5))
    json.dumps(doc)
    print(json.dumps({"seconds": time.perf_counter() - t, "segments": len(doc["segments"])}))
"""
LABELS = {"gunzip": "gunzip only (reference)", "json.loads": "json.loads (stdlib)",
          "summary": "capture-trace summary", "time": "capture-trace time"}


def best_of(kind: str, trace: Path, repeat: int) -> dict[str, Any]:
    runs = [bench_analyze.measure(kind, trace, sys.executable) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: float(r["seconds"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=500_000)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "capture-trace-bench"))
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the best time is kept")
    args = ap.parse_args()
    trace = bench_analyze.generate(args.events, Path(args.cache))
    rows = {kind: best_of(kind, trace, args.repeat) for kind in LABELS}
    ours = rows["time"]
    print(f"\ntrace: {trace} ({trace.stat().st_size / 2**20:.1f} MiB gzip, {rows['summary']['events']:,} events)\n")
    print(f"{'what':<28} {'seconds':>9} {'peak RSS MiB':>13} {'time / ours':>12} {'RSS / ours':>11}")
    for kind, r in rows.items():
        sec, rss = float(r["seconds"]), float(r["rss_mib"])
        print(
            f"{LABELS[kind]:<28} {sec:>9.2f} {rss:>13.0f} {sec / float(ours['seconds']):>11.1f}x "
            f"{rss / float(ours['rss_mib']):>10.1f}x"
        )
    print(f"\ntime peak RSS / json.loads's = {float(ours['rss_mib']) / float(rows['json.loads']['rss_mib']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
