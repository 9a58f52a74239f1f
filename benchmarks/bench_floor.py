"""Benchmark: each command against its physical floor, not against a strawman.

Why these rows: a Python reader cannot beat "inflate the file and let msgspec decode exactly the fields
the command needs" — that is the floor; the goals: each command within 2.5x (summary),
2.2x (time), 1.8x (attribute) of its own floor in CPU seconds (the child's own rusage), peak RSS not above
before. Also printed: how directory work scales from one worker to two (goal 1.7x on two idle cores).
The CLI's import cost and its goal are ``bench_startup.py``'s (one home for that goal). Every row is
its own process; all rows come from one run, so the ratios compare like with like on a noisy machine.
``json.load`` + walk is not timed here (``bench_analyze.py`` / ``bench_attribute.py`` have it).

    python benchmarks/bench_floor.py [--events 500000] [--cache /tmp/capture-trace-bench] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_analyze  # noqa: E402 - the sibling benchmark: trace generation and per-process measuring

# The fields each command reads, as msgspec structs: the floor decodes exactly these.
FIELDS = {
    "summary": "reader.Event",  # every field the op-sequence record keeps (ids, shapes, kernels, flows)
    "time": "time",  # cat, name, pid, tid, ts, dur: no args at all
    "attribute": "reader.SlimEvent",  # the timeline's fields (shapes, correlation, kernel, node id)
}
FLOOR = """
    import sys, time
    t = time.perf_counter()
    import msgspec
    from mixins.analysis.read import reader
    try:
        from isal.isal_zlib import decompress
    except ImportError:
        from zlib import decompress
    class Timed(msgspec.Struct, gc=False):
        cat: str | None = None
        name: str | None = None
        pid: int | str | None = None
        tid: int | str | None = None
        ts: float | None = None
        dur: float | None = None
    element = {"reader.Event": reader.Event, "reader.SlimEvent": reader.SlimEvent, "time": Timed}[FIELDS]
    doc = msgspec.json.Decoder(msgspec.defstruct("Doc", [("traceEvents", list[element])]))
    with open(sys.argv[1], "rb") as f:
        n = len(doc.decode(decompress(f.read(), 31)).traceEvents)
    print(json.dumps({"seconds": time.perf_counter() - t, "events": n}))
"""
OURS = {
    "summary": """
        import sys, time
        t = time.perf_counter()
        from mixins.analysis.model.records import load_record, summarize
        s = summarize(load_record(sys.argv[1]), 10)
        print(json.dumps({"seconds": time.perf_counter() - t, "events": s["events"]}))
    """,
    "time": """
        import sys, time
        t = time.perf_counter()
        from mixins.analysis.commands.time import time_trace
        from mixins.analysis.serialise import to_json
        doc = to_json(time_trace(sys.argv[1], 5))
        print(json.dumps({"seconds": time.perf_counter() - t, "events": None}))
    """,
    "attribute": """
        import sys, time
        t = time.perf_counter()
        from mixins.analysis.model.windows import load_capture
        windows = load_capture(sys.argv[1]).windows
        print(json.dumps({"seconds": time.perf_counter() - t, "events": None}))
    """,
}
GOAL = {"summary": 2.5, "time": 2.2, "attribute": 1.8}  # ours / floor, CPU seconds (the columnar model's goals)
SCALING_GOAL = 1.7


def best(kind: str, trace: Path, repeat: int) -> dict[str, Any]:
    runs = [bench_analyze.measure(kind, trace, sys.executable) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: float(r["cpu_s"]))


def scaling(trace: Path, repeat: int) -> tuple[float, float]:
    """Wall seconds of ``check -j 1`` and ``-j 2`` on a directory of four copies of the trace."""
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(4):
            shutil.copy(trace, Path(tmp) / f"cuda_graph_capture-DecodeCudaGraphRunner-TP-{n}.json.gz")
        env = bench_analyze.child_env()

        def run(jobs: str) -> float:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mixins", "check", tmp, "--json", "-j", jobs],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            return time.perf_counter() - t

        return min(run("1") for _ in range(repeat)), min(run("2") for _ in range(repeat))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=500_000)
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "capture-trace-bench")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    trace = bench_analyze.generate(args.events, args.cache)
    print(f"trace: {trace} ({trace.stat().st_size / 2**20:.1f} MiB gzip); best of {args.repeat} per row; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<10} {'floor cpu s':>11} {'ours cpu s':>10} {'ours/floor':>10} {'floor MiB':>9} "
          f"{'ours MiB':>8}  goal")
    for command, fields in FIELDS.items():
        bench_analyze.CHILD[f"floor-{command}"] = FLOOR.replace("[FIELDS]", f"[{fields!r}]")
        bench_analyze.CHILD[f"ours-{command}"] = OURS[command]
        floor = best(f"floor-{command}", trace, args.repeat)
        ours = best(f"ours-{command}", trace, args.repeat)
        ratio = ours["cpu_s"] / floor["cpu_s"]
        print(f"{command:<10} {floor['cpu_s']:11.2f} {ours['cpu_s']:10.2f} {ratio:9.2f}x {floor['rss_mib']:9.0f} "
              f"{ours['rss_mib']:8.0f}  <= {GOAL[command]}x: {'met' if ratio <= GOAL[command] else 'not met'}")
    one, two = scaling(trace, args.repeat)
    print(f"check of 4 traces: -j 1 {one:.2f} s, -j 2 {two:.2f} s: {one / two:.2f}x"
          f"  (goal >= {SCALING_GOAL}x on two idle cores: {'met' if one / two >= SCALING_GOAL else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
