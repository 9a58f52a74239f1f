"""Benchmark: what ``capture-trace`` costs before it does any work, against the interpreter and the libraries.

Why ratios in one run: start-up is tens of milliseconds on a machine shared with other jobs, so every row
is measured in the same run, interleaved, each in a fresh process, by the CPU time (user + system) the
child itself used (``os.wait4``'s resource usage), the median of ``--repeat`` runs. Bytecode is cached as
an installed package has it (``bench_analyze.child_env``); each code runs once unmeasured first.

Rows and goals (docs/DESIGN.md §7.6):

- anchor: ``python -c pass`` (the interpreter and ``site``);
- ``capture-trace --version``: at most 2x the anchor (it imports no command module and no
  ``importlib.metadata``: ``mixins.cli``);
- ``capture-trace --help`` and ``summary --help``: shown against the anchor and the floor;
- the libraries' floor: ``import msgspec, numpy`` and argparse parsing ``attribute --json R C`` with a
  two-argument sub-command, the least any ``attribute`` run needs;
- ``attribute --json``'s import (building and parsing our CLI for it): at most the floor + 40 ms.

    python benchmarks/bench_startup.py [--repeat 15] [--source DIR]

``--source`` measures another checkout of the package (an older commit unpacked with ``git archive``), so
before and after come from one run of this script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_analyze  # noqa: E402 - the sibling benchmark: the measured children's environment

VERSION_GOAL, IMPORT_GOAL_MS = 2.0, 40.0
# What the console script pip writes runs (``import re, sys; from mixins.cli import main``), given argv.
SCRIPT = "import re, sys\nfrom mixins.cli import main\nsys.exit(main())"
ATTRIBUTE = (
    "from mixins.cli import build_parser\nbuild_parser('attribute').parse_args(['attribute', '--json', 'r', 'c'])"
)
LIBRARIES = (
    "import argparse, msgspec{numpy}\np = argparse.ArgumentParser()\nc = p.add_subparsers().add_parser('attribute')\n"
    "c.add_argument('--json', action='store_true'); c.add_argument('replay'); c.add_argument('capture')\n"
    "p.parse_args(['attribute', '--json', 'r', 'c'])"
)


def cpu_ms(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU milliseconds (user + system) one child used, from its own resource usage."""
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} exited {proc.returncode}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def has_numpy() -> bool:
    done = subprocess.run([sys.executable, "-c", "import numpy"], capture_output=True)
    return done.returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="runs per row (the median is shown)")
    ap.add_argument("--source", type=Path, help="the checkout to measure (default: this one)")
    args = ap.parse_args()
    env = bench_analyze.child_env()
    source = (args.source or bench_analyze.ROOT).resolve()  # the children's cwd too: ``-c`` puts it first on sys.path
    env["PYTHONPATH"] = str(source) + os.pathsep + env["PYTHONPATH"]
    numpy = has_numpy()
    py = [sys.executable]
    rows = {
        "python -c pass (anchor)": [*py, "-c", "pass"],
        "capture-trace --version": [*py, "-c", SCRIPT, "--version"],
        "capture-trace --help": [*py, "-c", SCRIPT, "--help"],
        "capture-trace summary --help": [*py, "-c", SCRIPT, "summary", "--help"],
        "libraries' floor (msgspec, argparse" + (", numpy)" if numpy else "; numpy not installed)"): [
            *py, "-c", LIBRARIES.format(numpy=", numpy" if numpy else "")
        ],
        "attribute --json's import": [*py, "-c", ATTRIBUTE],
    }
    for argv in rows.values():  # fills the bytecode cache
        cpu_ms(argv, env, source)
    runs: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(max(1, args.repeat)):  # interleaved: a burst of load hits every row alike
        for name, argv in rows.items():
            runs[name].append(cpu_ms(argv, env, source))
    ms = {name: statistics.median(values) for name, values in runs.items()}
    anchor, floor = ms["python -c pass (anchor)"], next(v for k, v in ms.items() if k.startswith("libraries"))
    print(f"source {source}; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; CPU ms (user + system), median of {args.repeat}")
    for name, value in ms.items():
        print(f"  {name:<52} {value:7.1f} ms  {value / anchor:5.2f}x anchor  {value - floor:+7.1f} ms vs floor")
    version = ms["capture-trace --version"] / anchor
    extra = ms["attribute --json's import"] - floor
    print(f"goal: --version <= {VERSION_GOAL:g}x anchor: {version:.2f}x "
          f"{'met' if version <= VERSION_GOAL else 'NOT met'}")
    print(f"goal: attribute --json's import <= floor + {IMPORT_GOAL_MS:g} ms: {extra:+.1f} ms "
          f"{'met' if extra <= IMPORT_GOAL_MS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
