"""What each fresh interpreter of the analyzer tests runs: ``python -m analysis_child CASE [ARG...]``.

One function per child-process body, so ruff and mypy check them like any other code. Only the standard
library is imported at the top: ``mixins`` is imported inside each case, after the case has set its
resource limit, and one case checks that the analyzer never imports torch. ``command`` and ``child_env``
are for the tests that start them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def command(case: str, *args: object) -> list[str]:
    """The command running one case in a fresh interpreter (with this directory on its path: ``child_env``)."""
    return [sys.executable, "-m", "analysis_child", case, *map(str, args)]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with this directory first on PYTHONPATH, then ``extra``'s PYTHONPATH
    (or the inherited one), then the rest of ``extra``."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    return env


def run_child(case: str, *args: object, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    """One case in a fresh interpreter, the repository on its path; stdout and stderr captured unless given."""
    if "stdout" not in kw:
        kw["capture_output"] = True
    return subprocess.run(command(case, *args), text=True, env=child_env(PYTHONPATH=str(REPO)), cwd=REPO,
                          timeout=timeout, errors="surrogateescape", **kw)


def bounded(limit: int, *argv: object) -> tuple[subprocess.CompletedProcess[str], int]:
    """The CLI under RLIMIT_AS = ``limit``: (the process, its stderr without the RSS line; its peak RSS in
    bytes), the figure printed for docs/DESIGN.md §8.1 (``-rP``)."""
    proc = run_child("bounded_cli", limit, *argv, timeout=600)
    *lines, last = proc.stderr.splitlines()
    assert last.startswith("peak_rss_kib "), proc.stderr[-2000:]
    proc.stderr = "".join(line + "\n" for line in lines)
    peak = int(last.split()[1]) * 1024
    print(f"peak RSS {peak >> 20} MiB: {' '.join(map(str, argv))[:200]}")
    return proc, peak


def broken_pipe(*argv: object) -> tuple[int, str]:
    """``capture-trace ARGV`` with stdout a pipe whose read end is closed before it runs: (exit, stderr)."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = run_child("analyzer_cli", *argv, stdout=w, stderr=subprocess.PIPE)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr


def analyzer_cli(*argv: str) -> None:
    """An analyzer subcommand through the console script's entry point, as a user would run it."""
    from mixins.cli import main

    sys.exit(main(list(argv)))


def analyzer_imports_torch() -> None:
    """Prints whether importing the analyzer's CLI imported torch."""
    import mixins.analysis.cli  # noqa: F401 - the import is what is checked

    print("torch" in sys.modules)


def modules_after_cli(*argv: str) -> None:
    """Runs ``capture-trace ARGV`` (stdout discarded) and prints, as JSON, the modules it imported."""
    import contextlib
    import io
    import json

    from mixins.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(list(argv))
    print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))


def bounded_cli(limit: str, *argv: str) -> None:
    """The real CLI under RLIMIT_AS = ``limit`` bytes; its peak RSS (kiB) is the last line on stderr."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    from mixins.cli import main as capture_trace

    try:
        rc = capture_trace(argv)
    finally:
        # VmHWM, not ru_maxrss: Linux carries the parent's high-water mark across fork + exec into
        # ru_maxrss, so a child of a big pytest worker would report the worker's size.
        with open("/proc/self/status") as status:
            hwm = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
        print(f"peak_rss_kib {hwm}", file=sys.stderr)
    sys.exit(rc)


def spawn_cli(*argv: str) -> None:
    """The real CLI with its workers started by "spawn": they do not inherit the parent's memory."""
    import multiprocessing

    multiprocessing.set_start_method("spawn", force=True)
    analyzer_cli(*argv)


def annotate_under_fsize_limit(replay: str, capture: str, out: str) -> None:
    """``attribute --annotate`` under RLIMIT_FSIZE with SIGXFSZ ignored: the write fails half-way (EFBIG)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
    analyzer_cli("attribute", replay, capture, "--annotate", out)


def flip_after_listing(victim: str, *argv: str) -> None:
    """The CLI with the attacker's timing made exact: right after the directory is listed (and the
    name seen as a regular trace), ``victim`` becomes a FIFO, which a read by name would hang on."""
    from mixins.analysis import jobs
    from mixins.analysis.commands import ls

    listed = jobs.trace_files

    def then_flip(directory: str) -> tuple[list[str], list[str]]:
        files = listed(directory)
        os.unlink(victim)
        os.mkfifo(victim)
        return files

    for module in (jobs, ls):  # where each command looks it up
        module.trace_files = then_flip  # type: ignore[attr-defined]
    analyzer_cli(*argv)


def main(argv: list[str] | None = None) -> None:
    case, *args = sys.argv[1:] if argv is None else argv
    globals()[case](*args)


if __name__ == "__main__":
    main()
