"""Benchmark: the analyzer's memory per event, per event shape and command, and attribute's work on
adversarial captures — this tree beside another (``--anchor``: a checkout from before a change).

Why: the event limit bounds memory only if every event shape is cheap (kernel-like events once cost
~315 B each in ``summary``, ~3 GB at the default 10M ``--max-events``; ``{}`` events little); and
``attribute`` verifying every distinct replayed sequence against every capture window, launch by
launch, takes 75 s at 1,000 windows x 500 launches with a 300-launch replay. Inputs are GENERATED
(``tests/analysis/shapes.py``).

    python benchmarks/bench_bounds.py memory [--shapes kernel,cpu_op] [--commands summary,time]
                                             [--events 50000,250000] [--anchor TREE]
    python benchmarks/bench_bounds.py attribute [--windows 1000] [--launches 500] [--replays 300]
                                                [--anchor TREE] [--cpu-limit 600]

``memory``: each (shape, command) runs the real CLI (``-j 1``: no worker processes) in its own child on
two trace sizes; bytes per event = the difference of the children's own peak RSS (``VmHWM``) over the
difference in events, so the interpreter, imports and the reader's buffers cancel out. The default
``--max-events`` times that figure (plus the base) is what the worst trace under the limit costs.
``attribute``: CPU seconds of ``attribute --json -j 1`` on a capture of W windows x L named launches
(every window distinct) and a replay of R graph launches, each a distinct sequence (``shapes.REPLAY_MODES``:
each found in one window; each with a kernel no window has; each out of order in every window).
Children run under ``RLIMIT_CPU``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "analysis"), str(ROOT)]  # shapes.py imports tests.trace_files

from shapes import COMMANDS, REPLAY_MODES, SHAPES, adversarial_pair, cli_args, write_shape  # noqa: E402

MIB = 1 << 20
DEFAULT_MAX_EVENTS = 10_000_000

CHILD = """
import contextlib, io, sys
from mixins.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
with open("/proc/self/status") as status:
    print(next(line for line in status if line.startswith("VmHWM:")).split()[1], file=sys.stderr)
sys.exit(rc)
"""


def run(tree: Path, argv: list[str], cpu_limit: int = 0) -> tuple[int, float, float, str]:
    """(exit code, own peak RSS MiB, CPU s, last stderr line) of the CLI run from ``tree`` in a child."""

    def limit() -> None:
        if cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit))

    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    rss = int(err.pop()) / 1024 if err and err[-1].isdigit() else float("nan")
    return rc, rss, usage.ru_utime + usage.ru_stime, (err[-1] if err else "")[:120]


def memory(args: argparse.Namespace, trees: list[tuple[str, Path]]) -> None:
    small, big = (int(x) for x in args.events.split(","))
    print(
        f"bytes per event = (peak RSS at {big:,} - at {small:,} events) / {big - small:,}; "
        f"'at max' = the base plus that, times --max-events {DEFAULT_MAX_EVENTS:,}"
    )
    print("| shape | command | tree | MiB at small | MiB at big | B/event | MiB at max-events |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as tmp:
        for shape in args.shapes.split(","):
            traces = []
            for n in (small, big):
                d = Path(tmp) / f"{shape}-{n}"
                d.mkdir()
                traces.append(write_shape(d / "trace.json.gz", shape, n))
            for command in args.commands.split(","):
                for label, tree in trees:
                    got = [run(tree, cli_args(command, t)) for t in traces]
                    bad = [g for g in got if g[0] not in (0, 1)]
                    if bad:
                        print(f"| {shape} | {command} | {label} | exit {bad[0][0]}: {bad[0][3]} | | | |")
                        continue
                    (_, lo, _, _), (_, hi, _, _) = got
                    per = (hi - lo) * MIB / (big - small)
                    at_max = (lo * MIB + per * (DEFAULT_MAX_EVENTS - small)) / MIB
                    print(f"| {shape} | {command} | {label} | {lo:.0f} | {hi:.0f} | {per:.0f} | {at_max:,.0f} |")
                    sys.stdout.flush()


def attribute(args: argparse.Namespace, trees: list[tuple[str, Path]]) -> None:
    print(
        f"capture: {args.windows:,} windows x {args.launches} named launches (each window distinct); "
        f"replay: {args.replays} graph launches, each a distinct sequence; CPU limit {args.cpu_limit} s"
    )
    print("| replayed sequences | tree | exit | CPU s | peak RSS MiB | note |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as tmp:
        for mode in REPLAY_MODES:
            d = Path(tmp) / mode
            d.mkdir()
            capture, replay = adversarial_pair(d, args.windows, args.launches, args.replays, mode)
            cpu = {}
            for label, tree in trees:
                rc, rss, seconds, last = run(
                    tree, ["attribute", "--json", "-j", "1", str(replay), str(capture)], args.cpu_limit
                )
                cpu[label] = seconds
                note = "killed at the CPU limit" if rc < 0 else last
                print(f"| {mode} | {label} | {rc} | {seconds:.1f} | {rss:.0f} | {note} |")
                sys.stdout.flush()
            if "anchor" in cpu and cpu["ours"] > 0:
                print(
                    f"|  | anchor / ours |  | {cpu['anchor'] / cpu['ours']:.1f}x |  | "
                    "(a lower bound if the anchor was killed) |"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["memory", "attribute"])
    ap.add_argument("--anchor", type=Path, help="another checkout to run the same cases with")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--events", default="50000,250000", help="the two trace sizes (events)")
    ap.add_argument("--windows", type=int, default=1000)
    ap.add_argument("--launches", type=int, default=500)
    ap.add_argument("--replays", type=int, default=300)
    ap.add_argument("--cpu-limit", type=int, default=600, help="RLIMIT_CPU of each attribute child (s)")
    args = ap.parse_args()
    trees = [("ours", ROOT)] + ([("anchor", args.anchor)] if args.anchor else [])
    (memory if args.what == "memory" else attribute)(args, trees)


if __name__ == "__main__":
    main()
