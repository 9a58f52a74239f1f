"""Benchmark: the analyzer on hostile input — seconds and peak RSS per case, ours beside another tree.

Why: a reader without bounds took 3 min / 6 GB for 1 GB of ``{},``, 5.3 GB for one 1 GB string and 53 s
for a 30 MB key. Each case runs ``capture-trace summary`` in its own child process (peak RSS from
its own ``VmHWM``), optionally under an address-space limit, for this tree and, with ``--anchor``, for
another checkout (e.g. the commit before the fix), printed side by side.

    python benchmarks/bench_hostile.py [--anchor /path/to/old/tree] [--as-limit-mib 4096]
                                       [--cases events,string,key,names] [--cache /tmp/capture-trace-hostile]
                                       [--names-base 25000] [--table-segments 5000]

``--table-segments N`` times ``summary``'s text tables alone (``table_growth``) for N, 2N and 4N segments
and prints the growth per doubling (goal: at most 2.3x; 10k segments once took 61 s against 2.3 s for
``--json``).

``--growth``: each shape that once cost quadratic time or gigabytes (``tests/analysis/hostile_shapes.py``:
long names and labels, distinct ops, nested segments, nested and sequential capture windows, many
segments through ``diff``) at 1x, 2x and 4x its size, with the command that once choked on it; prints CPU
seconds and peak RSS per size and the growth ratio per doubling of (CPU - the floor: the same command on
an empty trace). Goal: <= 2.3x per doubling for every shape.

    python benchmarks/bench_hostile.py --growth [--shapes nested_windows,...] [--scale 0.5] [--anchor TREE]

Case ``names``: ``ls`` and ``clean`` of a directory holding 1x, 2x and 4x ``--names-base`` staging-like
names another user planted (uid 65534, a dead pid of this host: each one examined, none removable), with
the growth ratio per doubling (linear: 2.0; goal <= 2.3); 100k names once cost ``ls`` 96 s.
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
import resource, sys
from mixins.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        print(next(line for line in status if line.startswith("VmHWM:")).strip(), file=sys.stderr)
    print("ru_maxrss:", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def run(
    tree: Path, trace: Path, extra: list[str], as_limit: int, argv: list[str] | None = None
) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak RSS MiB, exit code, last stderr line) of one CLI run from ``tree``
    (``summary TRACE EXTRA`` unless ``argv`` is given)."""

    def limit() -> None:
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *(argv if argv is not None else ["summary", str(trace), *extra])],
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
    lines = [line for line in lines if not line.startswith(("VmHWM:", "ru_maxrss:"))]
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
    render_summary(doc["traces"])
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


# shape -> (size at 1x, the command that once choked on it: argv with {trace}), tests/analysis/hostile_shapes.py
GROWTH: dict[str, tuple[int, list[str]]] = {
    "long_names": (2 << 20, ["summary", "{trace}"]),
    "long_labels": (2 << 20, ["summary", "{trace}"]),
    "distinct_ops": (100_000, ["summary", "--json", "{trace}"]),
    "nested_segments": (10_000, ["check", "-j", "1", "{trace}"]),
    "nested_windows": (4_000, ["summary", "--json", "{trace}"]),
    "sequential_windows": (4_000, ["summary", "--json", "{trace}"]),
    "many_segments": (20_000, ["diff", "--json", "{trace}", "{trace}"]),
}


def growth(args: argparse.Namespace, trees: list[tuple[str, Path]]) -> None:
    sys.path[:0] = [str(ROOT / "tests" / "analysis"), str(ROOT)]
    from hostile_shapes import SHAPES

    from tests.trace_files import write_trace

    empty = write_trace(args.cache / "empty.json.gz", iter([]))
    print("| shape | command | tree | size | CPU s | wall s | peak RSS MiB | exit | CPU - floor, growth per doubling |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.shapes.split(","):
        base, argv = GROWTH[name]
        for label, tree in trees:
            floor = run(tree, empty, [], 0, [a.format(trace=empty) for a in argv])[1]
            last = None
            for mult in (1, 2, 4):
                n = max(1, int(base * args.scale * mult))
                trace = args.cache / f"{name}-{n}.json.gz"
                if not trace.exists():
                    write_trace(trace, SHAPES[name](n))
                cmd = [a.format(trace=trace) for a in argv]
                wall, cpu, rss, rc, _ = run(tree, trace, [], args.as_limit_mib * MIB, cmd)
                net = max(cpu - floor, 1e-3)
                ratio = f"{net:.2f} s, x{net / last:.2f}" if last else f"{net:.2f} s (floor {floor:.2f} s)"
                last = net
                print(f"| {name} | {argv[0]} | {label} | {n:,} | {cpu:.2f} | {wall:.2f} | {rss:.0f} | {rc} | {ratio} |")


def plant_names(directory: Path, count: int) -> Path:
    """``count`` staging-shaped directories of uid 65534 with a dead pid of this host (made once)."""
    sys.path.insert(0, str(ROOT))
    from mixins.formats import STAGING_PREFIX
    from mixins.output_dir import Here

    if (directory / ".complete").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    here = Here.now()
    for i in range(count):
        name = directory / f"{STAGING_PREFIX}4194303.{here.pid_namespace}.{i:08x}.{here.host}"
        name.mkdir(mode=0o700, exist_ok=True)
        os.chown(name, 65534, 65534)
    (directory / ".complete").touch()
    return directory


def time_command(tree: Path, argv: list[str]) -> float:
    """CPU seconds (user + system) of ``capture-trace ARGV`` run from ``tree``, stdout discarded: CPU
    time, not wall, so that a shared, loaded machine still gives comparable ratios."""
    proc = subprocess.Popen([sys.executable, "-m", "mixins", *argv], cwd=tree,
                            env={**os.environ, "PYTHONPATH": str(tree)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def bench_names(trees: list[tuple[str, Path]], cache: Path, base: int) -> None:
    print("| case | names | tree | ls CPU s | clean CPU s | ls growth | clean growth |")
    print("|---|---|---|---|---|---|---|")
    for label, tree in trees:
        last: tuple[float, float] | None = None
        for factor in (1, 2, 4):
            directory = plant_names(cache / f"names-{base * factor}", base * factor)
            ls_s, clean_s = time_command(tree, ["ls", str(directory)]), time_command(tree, ["clean", str(directory)])
            growth = ("", "") if last is None else (f"{ls_s / last[0]:.2f}x", f"{clean_s / last[1]:.2f}x")
            print(f"| names | {base * factor:,} | {label} | {ls_s:.2f} | {clean_s:.2f} | {growth[0]} | {growth[1]} |",
                  flush=True)
            last = (ls_s, clean_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchor", type=Path, help="another checkout to run the same cases with")
    ap.add_argument("--as-limit-mib", type=int, default=0, help="RLIMIT_AS for every run (0: none)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/capture-trace-hostile"))
    ap.add_argument("--table-segments", type=int, default=0, metavar="N",
                    help="time summary's text tables at N, 2N, 4N segments (0: skip)")
    ap.add_argument("--growth", action="store_true", help="time each hostile shape at 1x, 2x, 4x its size")
    ap.add_argument("--shapes", default=",".join(GROWTH), help="--growth: the shapes to run")
    ap.add_argument("--scale", type=float, default=1.0, help="--growth: multiply every 1x size by this")
    ap.add_argument("--names-base", type=int, default=25000, help="planted names at 1x for the names case")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    trees = [("ours", ROOT)] + ([("anchor", args.anchor)] if args.anchor else [])
    if args.growth:
        growth(args, trees)
        return
    print("| case | gzip KB | tree | wall s | CPU s | peak RSS MiB | exit | stderr (last line) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in filter(None, args.cases.split(",")):
        if name == "names":
            bench_names(trees, args.cache, args.names_base)
            continue
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
