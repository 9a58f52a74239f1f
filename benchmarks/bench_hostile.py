"""Benchmark: the analyzer on hostile input — seconds and peak RSS per case, ours beside another tree.

Why: issue #10 measured 3 min / 6 GB for 1 GB of ``{},``, 5.3 GB for one 1 GB string and 53 s for a
30 MB key. Each case runs ``capture-trace summary`` in its own child process (peak RSS from
its own ``VmHWM``), optionally under an address-space limit, for this tree and, with ``--anchor``, for
another checkout (e.g. the commit before the fix), printed side by side.

    python benchmarks/bench_hostile.py [--anchor /path/to/old/tree] [--as-limit-mib 4096]
                                       [--cases events,string,key] [--cache /tmp/capture-trace-hostile]
                                       [--table-segments 5000]

``--table-segments N`` times ``summary``'s text tables alone (``table_growth``) for N, 2N and 4N segments
and prints the growth per doubling (goal: at most 2.3x; 10k segments once took 61 s against 2.3 s for
``--json``).
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB, GB = 1 << 20, 1 << 30

# name -> (head, repeated unit, bytes of units, tail, extra CLI arguments)
CASES: dict[str, tuple[bytes, bytes, int, bytes, list[str]]] = {
    "events": (b'{"traceEvents": [', b"{},", GB, b"{}]}", []),
    "string": (b'{"x": "', b"a", GB, b'", "traceEvents": []}', []),
    "key": (b'{"', b"k", 30 * MIB, b'": 1, "traceEvents": []}', []),
}


def generate(path: Path, head: bytes, unit: bytes, total: int, tail: bytes) -> Path:
    """Concatenated gzip members (level 9): one compressed 64 MiB chunk written many times."""
    if path.exists():
        return path
    units = min(total, 64 * MIB) // len(unit)
    chunk = gzip.compress(unit * units, 9)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as f:
        f.write(gzip.compress(head, 9))
        for _ in range(total // (units * len(unit))):
            f.write(chunk)
        f.write(gzip.compress(tail, 9))
    tmp.replace(path)
    return path


# The CLI, then its own peak RSS (VmHWM) on stderr's last line. Not ru_maxrss from wait4: Linux
# carries the parent's high-water mark across fork + exec into it.
CHILD = """
import sys
from mixins.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        print(next(line for line in status if line.startswith("VmHWM:")).strip(), file=sys.stderr)
sys.exit(rc)
"""


def run(tree: Path, trace: Path, extra: list[str], as_limit: int) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak RSS MiB, exit code, last stderr line) of one CLI run from ``tree``."""

    def limit() -> None:
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "summary", str(trace), *extra],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    lines = err.strip().splitlines()
    hwm = [int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM:")]
    lines = [line for line in lines if not line.startswith("VmHWM:")]
    last = lines[-1] if lines else ""
    # Without VmHWM (the child died before printing it) fall back to wait4's figure, an upper bound.
    rss = hwm[0] if hwm else usage.ru_maxrss / 1024
    return seconds, usage.ru_utime + usage.ru_stime, rss, proc.returncode, last[:150]


# ``summary --json``'s document, read once, then only the text rendering timed (the model's time, which
# ``--json`` shares, is not the tables'): seconds on stdout.
TABLE_CHILD = """
import io, json, sys, time
from contextlib import redirect_stdout
from mixins.analysis.render import render_summary
doc = json.load(open(sys.argv[1]))
t0 = time.perf_counter()
with redirect_stdout(io.StringIO()):
    render_summary(doc["traces"], 5)
print(time.perf_counter() - t0)
"""


def segments_trace(path: Path, segments: int) -> Path:
    """A capture of ``segments`` ranges (``capture::bs=N``), one shaped op each: one row and one top
    table per segment."""
    if path.exists():
        return path
    events = []
    for i in range(segments):
        events.append(f'{{"ph":"X","cat":"user_annotation","name":"capture::bs={i + 1}","pid":1,"tid":1,'
                      f'"ts":{i * 100},"dur":90}}')
        events.append(f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{i * 100 + 1},"dur":10,'
                      f'"args":{{"Input Dims":[[{i + 1},16],[16,16]],"Input type":["float","float"]}}}}')
    tmp = path.with_suffix(".part")
    tmp.write_bytes(gzip.compress(('{"traceEvents":[' + ",".join(events) + "]}").encode(), 6))
    tmp.replace(path)
    return path


def table_growth(tree: Path, cache: Path, base: int) -> list[float]:
    """Seconds of ``summary``'s text tables (``render_summary``, in a child from ``tree``) for ``base``,
    2x and 4x segments, each printed with its growth over the previous size."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    times: list[float] = []
    for n in (base, 2 * base, 4 * base):
        trace = segments_trace(cache / f"segments-{n}.json.gz", n)
        doc = cache / f"segments-{n}.summary.json"
        if not doc.exists():
            done = subprocess.run([sys.executable, "-m", "mixins", "summary", "--json", str(trace)], cwd=tree,
                                  env=env, capture_output=True, check=True)
            doc.write_bytes(done.stdout)
        out = subprocess.run([sys.executable, "-c", TABLE_CHILD, str(doc)], cwd=tree, env=env,
                             capture_output=True, text=True, check=True)
        times.append(float(out.stdout))
        growth = f"{times[-1] / times[-2]:.2f}x" if len(times) > 1 else "-"
        print(f"| summary tables | {n:,} segments | {tree} | {times[-1]:.2f} s | growth per doubling {growth} |")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchor", type=Path, help="another checkout to run the same cases with")
    ap.add_argument("--as-limit-mib", type=int, default=0, help="RLIMIT_AS for every run (0: none)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/capture-trace-hostile"))
    ap.add_argument("--table-segments", type=int, default=0, metavar="N",
                    help="time summary's text tables at N, 2N, 4N segments (0: skip)")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    trees = [("ours", ROOT)] + ([("anchor", args.anchor)] if args.anchor else [])
    print("| case | gzip KB | tree | wall s | CPU s | peak RSS MiB | exit | stderr (last line) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in filter(None, args.cases.split(",")):
        head, unit, total, tail, extra = CASES[name]
        trace = generate(args.cache / f"{name}.json.gz", head, unit, total, tail)
        for label, tree in trees:
            wall, cpu, rss, rc, last = run(tree, trace, extra, args.as_limit_mib * MIB)
            size = trace.stat().st_size // 1024
            print(f"| {name} | {size} | {label} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {rc} | {last} |")
    for _, tree in trees if args.table_segments else ():
        table_growth(tree, args.cache, args.table_segments)


if __name__ == "__main__":
    main()
