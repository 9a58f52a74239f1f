"""The analyzer's sub-commands: ``ls``, ``summary``, ``diff``, ``check``, ``time`` (``attribute``: attribute_cmd).

Exit codes (as GNU diff): 0 ok, 1 difference/inconsistency found, 2 bad input or usage; trouble
(2) wins over a difference (1), so a CI gate never passes on an unreadable rank. 141 (128 + SIGPIPE,
what a shell shows for a writer killed by SIGPIPE): the reader of stdout went away (``… | head``);
quietly, and never 0 or 1, which ``check`` / ``diff`` use for "same" and "different".
Several files are read in parallel processes (one per core); each worker returns a small summary
or compact sequences, never raw events. Whatever goes wrong with one file (bad input, a limit, a
bug, a dead worker) is that file's one-line error: the other files are still reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from mixins.analysis import render
from mixins.analysis.identity import Identity, is_trace_name
from mixins.analysis.reader import Limits, TraceError, current_limits, using_limits
from mixins.helptext import ANALYSIS_COMMANDS, add_command, int_at_least, non_negative_int
from mixins.naming import SUBDIR

if TYPE_CHECKING:
    from concurrent.futures import Future

    from mixins.analysis.model import CompactTrace

# Each command imports what only it uses when it runs (records, compare, timing, ...): a command
# starts without loading the others' modules (``mixins.cli`` registers only the command being run).

__all__ = ["add_commands", "cmd_ls", "cmd_summary", "cmd_diff", "cmd_check", "trace_files"]

OK, DIFFERENT, TROUBLE = 0, 1, 2


COMMANDS = ANALYSIS_COMMANDS


def add_commands(subparsers: Any, only: str | None = None) -> None:
    """Register ``ls``, ``summary``, ``diff``, ``check``, ``time`` and ``attribute`` (or ``only`` that
    one) on argparse sub-parsers."""
    adders = dict(
        zip(COMMANDS, (_add_ls, _add_clean, _add_summary, _add_diff, _add_check, _add_time, _add_attribute), strict=True)
    )
    for name, add in adders.items():
        if only is None or only == name:
            add(subparsers)


def _add_attribute(subparsers: Any) -> None:
    from mixins.analysis.attribute_cmd import add_attribute_command  # imports this module

    add_attribute_command(subparsers)


def _add_ls(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "ls",
        "one row per trace in a directory: identity, size, events, segments",
        "List the traces of a directory (or one trace file): who wrote each (runner, TP/PP rank, capture "
        "number and where that came from), its size, event count and per-batch-size segments. --long "
        "prints each trace's recorded metadata instead: runner, ranks and group sizes, versions, host, "
        "device and time.",
        ["capture-trace ls /tmp/graph_capture_profile", "capture-trace ls --long demo-out"],
    )
    p.add_argument("dir", metavar="DIR", help=DIR_HELP)
    p.add_argument("-l", "--long", action="store_true", help="one block per trace with its recorded metadata")
    p.add_argument("--json", action="store_true", help="machine-readable output (includes the metadata)")
    p.set_defaults(func=with_limits(cmd_ls, p))


def _add_clean(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "clean",
        "remove the staging directories of exports whose process is gone",
        "Remove what interrupted exports left in a trace directory: staging directories (.capture-trace-"
        "staging.*) whose process is gone, on this host and in this pid namespace, owned by you. Others "
        "(another user's, a running process, another host) are listed and kept. `ls` lists them and never "
        "removes anything; an exporter removes its own host's dead ones as it goes (docs/DESIGN.md §2).",
        ["capture-trace clean /tmp/graph_capture_profile"],
    )
    p.add_argument("dir", metavar="DIR", help="a trace directory (where the traces are written)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_clean)


def _add_summary(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "summary",
        "per trace and segment: ops, signatures, launches, kernels",
        "Summarise traces per segment (one per captured batch size): events, CPU ops, distinct op "
        "signatures, kernel launches, graph launches, kernels and how they link, and the most frequent "
        "signatures with their kernels.",
        [
            "capture-trace summary cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz",
            "capture-trace summary --top 10 --json demo-out",
        ],
    )
    p.add_argument("traces", metavar="TRACE", nargs="+", help="trace files (.json or .json.gz) or directories")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--top", type=non_negative_int("--top"), default=5, metavar="N", help="top N signatures per segment")
    p.set_defaults(func=with_limits(cmd_summary, p))


def _add_diff(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "diff",
        "compare two traces' op-signature sequences per segment",
        "Compare two traces segment by segment (matched by label): ops added, removed and changed "
        "(shapes, types, scalar inputs, kernels), and the first op where they differ. Timestamps, ids "
        "and durations never count.",
        ["capture-trace diff run1/cuda_graph_capture-X-TP-0.json.gz run2/cuda_graph_capture-X-TP-0.json.gz"],
        exit_codes=("the traces captured the same", "they differ", "bad input or usage"),
    )
    p.add_argument("a", metavar="A", help="the reference trace file")
    p.add_argument("b", metavar="B", help="the trace compared with A")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=with_limits(cmd_diff, p))


def _add_check(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "check",
        "verify every TP rank of each runner is present and captured the same sequences",
        "Group a capture's traces by runner, pipeline stage and capture number; fail when a TP or PP "
        "rank is missing (from the group sizes the traces recorded) or when a rank captured a "
        "different op sequence than the lowest rank, naming the first divergent op. Files are read in "
        "parallel.",
        ["capture-trace check /tmp/graph_capture_profile", "capture-trace check -j 4 --json run1"],
    )
    p.add_argument("dir", metavar="DIR", help=DIR_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_jobs_option(p)
    p.set_defaults(func=with_limits(cmd_check, p))


def _add_time(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "time",
        "where capture time goes: warmup / capture / instantiate / other",
        "Split each segment (batch size, variant) of each runner's capture into warm-up passes, the "
        "capture window, graph instantiation and the rest; bars per segment, top CPU ops by self time per "
        "phase, runners side by side. Profiling inflates CPU time: compare shares, runners and batch sizes.",
        ["capture-trace time /tmp/graph_capture_profile", "capture-trace time --json --top 3 run1"],
        exit_codes=("every trace was timed", "(not used)", "bad input or usage (other files still reported)"),
    )
    p.add_argument("paths", metavar="TRACE_OR_DIR", nargs="+", help="trace files or directories of traces")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--top", type=non_negative_int("--top"), default=5, metavar="N", help="top N ops per phase")
    add_jobs_option(p)
    p.set_defaults(func=with_limits(cmd_time, p))


def add_jobs_option(p: argparse.ArgumentParser) -> None:
    """``-j/--jobs``: how many files are read at once, each in its own worker process."""
    jobs = non_negative_int("--jobs")
    p.add_argument("-j", "--jobs", type=jobs, default=0, metavar="N", help="worker processes; 0: one per core")


def with_limits(cmd: Callable[[argparse.Namespace], int], p: argparse.ArgumentParser) -> Callable[..., int]:
    """Give ``p`` the --max-events / --max-value-mib options; ``cmd`` runs under those limits."""
    d = Limits()
    p.add_argument(
        "--max-events",
        type=int_at_least(1, "--max-events"),
        default=d.max_events,
        metavar="N",
        help=f"refuse a trace with more traceEvents elements (default {d.max_events:,})",
    )
    p.add_argument(
        "--max-value-mib",
        type=int_at_least(1, "--max-value-mib"),
        default=d.max_value_bytes >> 20,
        metavar="MIB",
        help=f"refuse a larger key, top-level value or event (default {d.max_value_bytes >> 20})",
    )

    @functools.wraps(cmd)
    def run(args: argparse.Namespace) -> int:
        with using_limits(Limits(args.max_events, args.max_value_mib << 20)):
            return cmd(args)

    return run


DIR_HELP = f"directory of *.json[.gz] traces (or one trace file); a directory with only {SUBDIR}/ is searched there"


def trace_files(directory: str) -> list[str]:
    """Visible ``*.json[.gz]`` files of ``directory``, sorted; raises TraceError if none / unreadable."""
    if os.path.isfile(directory):
        return [directory]
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        raise TraceError(directory, "no such directory") from None
    except NotADirectoryError:
        raise TraceError(directory, "not a directory") from None
    except PermissionError:
        raise TraceError(directory, "permission denied") from None
    except OSError as exc:
        raise TraceError(directory, exc.strerror or str(exc)) from None
    except ValueError:
        raise TraceError(directory, "invalid path (contains a NUL byte)") from None
    files = [os.path.join(directory, n) for n in names if is_trace_name(n)]
    files = [f for f in files if not os.path.isdir(f)]
    if not files and SUBDIR in names and os.path.isdir(os.path.join(directory, SUBDIR)):
        return trace_files(os.path.join(directory, SUBDIR))  # the profiler dir itself was given
    if not files:
        raise TraceError(directory, "no traces (*.json.gz or *.json) in this directory")
    return files


def _expand(paths: list[str]) -> tuple[list[str], bool]:
    """Files as given, directories as their traces; bad directories reported (``True``)."""
    files, bad = [], False
    for path in paths:
        if not os.path.isdir(path):
            files.append(path)
            continue
        try:
            files += trace_files(path)
        except TraceError as exc:
            render.error(str(exc))
            bad = True
    return files, bad


def _summary_job(path: str, top: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    from mixins.analysis.records import load_record
    from mixins.analysis.serialise import summarize

    return summarize(load_record(path, progress), top)


def metadata_json(ident: Identity) -> dict[str, Any] | None:
    """What the trace recorded about its writer (``capture_trace``); None for traces without it."""
    if ident.source != "metadata":
        return None
    return {"runner_class": ident.runner_class, "pp_size": ident.pp_size, **ident.extra}


def _ls_job(path: str, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    from mixins.analysis.records import load_record
    from mixins.analysis.serialise import summarize

    rec = load_record(path, progress)
    return summarize(rec, 0) | {"metadata": metadata_json(rec.identity)}


def _compact_job(path: str, progress: Callable[[int, int], None] | None = None) -> CompactTrace:
    from mixins.analysis.model import compact
    from mixins.analysis.records import load_record

    return compact(load_record(path, progress))


def _run_one(limits: Limits, job: Callable[..., Any], path: str, *extra: Any) -> Any:
    """``job``'s result, or the TraceError to report: never an exception, so one file cannot stop the rest."""
    try:
        with using_limits(limits):  # a worker process does not share the parent's
            return job(path, *extra)
    except TraceError as exc:
        return exc
    except MemoryError:
        return TraceError(path, "out of memory (lower --max-events / --max-value-mib, or allow more memory)")
    except RecursionError:
        return TraceError(path, "invalid JSON: nested too deeply")
    except msgspec.ValidationError as exc:  # a raw args value (Input Dims, ...) decoded only now
        return TraceError(path, f"invalid JSON: number out of range in an event's args ({exc})")
    except Exception as exc:  # noqa: BLE001 - a bug must still be one line and exit 2, not a traceback
        return TraceError(path, f"cannot analyse ({type(exc).__name__}: {exc}); please report this")


def _map(
    job: Callable[..., Any], paths: list[str], extra: tuple[Any, ...], jobs: int, show: bool
) -> Iterable[tuple[str, Any]]:
    """Run ``job`` over paths (parallel when several), yielding (path, result or TraceError) in order."""
    workers = min(len(paths), jobs if jobs > 0 else (os.cpu_count() or 1))
    limits = current_limits()
    if workers <= 1:
        for p in paths:
            big = os.path.isfile(p) and os.path.getsize(p) >= render.PROGRESS_MIN_BYTES
            with render.progress_bytes(show and big, os.path.basename(p)) as bar:
                more = (bar,) if bar is not None else ()
                yield p, _run_one(limits, job, p, *extra, *more)
        return
    from concurrent.futures import ProcessPoolExecutor  # ~20 ms with multiprocessing: only when used

    with ProcessPoolExecutor(max_workers=workers) as pool, render.progress_files(show, len(paths)) as tick:
        futures = [pool.submit(_run_one, limits, job, p, *extra) for p in paths]
        yield from _gather(paths, futures, tick)


def _gather(
    paths: list[str], futures: list[Future[Any]], tick: Callable[[], None] | None = None
) -> Iterable[tuple[str, Any]]:
    """(path, result or TraceError) for each submitted ``_run_one``, in order; a dead worker is a TraceError."""
    from concurrent.futures.process import BrokenProcessPool

    for p, fut in zip(paths, futures, strict=True):
        try:
            res = fut.result()
        except BrokenProcessPool:  # killed (OOM killer, a signal): the others are still reported
            res = TraceError(p, "the process reading this file died (killed, or out of memory?)")
        except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be sent back
            res = TraceError(p, f"cannot analyse ({type(exc).__name__}: {exc}); please report this")
        yield p, res
        if tick is not None:
            tick()


def _collect(pairs: Iterable[tuple[str, Any]]) -> tuple[list[Any], bool]:
    """Results in order, and whether any file was bad (each reported on stderr as it comes)."""
    good, bad = [], False
    for _, res in pairs:
        if isinstance(res, TraceError):
            render.error(str(res))
            bad = True
        else:
            good.append(res)
    return good, bad


def cmd_ls(args: argparse.Namespace) -> int:
    from mixins.output_dir import sweep_path

    temps = sweep_path(args.dir, remove=False) if os.path.isdir(args.dir) else []  # listed, never removed
    if temps and not args.json:
        render.render_temps(temps)
    try:
        files = trace_files(args.dir)
    except TraceError as exc:
        render.error(str(exc))
        return TROUBLE
    rows, bad = _collect(_map(_ls_job, files, (), 0, not args.json))
    if args.json:
        render.print_json(
            {
                "traces": [
                    {k: r[k] for k in r if k != "totals"} | {"segments": [s["label"] for s in r["segments"]]}
                    for r in rows
                ],
                "temporaries": [dataclasses.asdict(t) for t in temps],
            }
        )
    elif rows and args.long:
        render.render_ls_long(rows)
    elif rows:
        render.render_ls(rows)
    return TROUBLE if bad else OK


def cmd_clean(args: argparse.Namespace) -> int:
    from mixins.output_dir import sweep_path

    if not os.path.isdir(args.dir):
        render.error(f"{args.dir}: not a directory")
        return TROUBLE
    temps = sweep_path(args.dir, remove=True)
    if args.json:
        render.print_json({"dir": args.dir, "temporaries": [dataclasses.asdict(t) for t in temps]})
    else:
        render.render_temps(temps, cleaning=True)
        if not temps:
            render.console().print(render.safe(f"{args.dir}: no staging directories"))
    return OK


def cmd_summary(args: argparse.Namespace) -> int:
    files, bad_dir = _expand(list(args.traces))
    traces, bad = _collect(_map(_summary_job, files, (args.top,), 0, not args.json))
    bad = bad or bad_dir
    if bad and not traces:
        return TROUBLE
    if args.json:
        render.print_json({"traces": traces})
    else:
        render.render_summary(traces, args.top)
    return TROUBLE if bad else OK


def cmd_diff(args: argparse.Namespace) -> int:
    from mixins.analysis.compare import diff_traces

    loaded, bad = _collect(_map(_compact_job, [args.a, args.b], (), 1, not args.json))
    if bad:
        return TROUBLE
    a, b = loaded
    diffs = diff_traces(a, b)
    different = any(d.status != "same" for d in diffs)
    if args.json:
        render.print_json({"a": args.a, "b": args.b, "same": not different, "segments": diffs})
    else:
        render.render_diff(args.a, args.b, diffs)
    return DIFFERENT if different else OK


def cmd_check(args: argparse.Namespace) -> int:
    from mixins.analysis.compare import check_traces

    try:
        files = trace_files(args.dir)
    except TraceError as exc:
        render.error(str(exc))
        return TROUBLE
    traces, bad = _collect(_map(_compact_job, files, (), args.jobs, not args.json))
    groups = check_traces(traces)
    divergent = any(not g.ok for g in groups)
    if args.json:
        render.print_json(
            {
                "dir": args.dir,
                "ok": not divergent and not bad,
                "bad_files": [f for f in files if f not in {t.path for t in traces}],
                "groups": groups,
            }
        )
    elif groups:
        render.render_check(groups)
    if bad:
        return TROUBLE
    return DIFFERENT if divergent else OK


def _time_job(path: str, top: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    from mixins.analysis.serialise import to_json
    from mixins.analysis.timing import time_trace

    return to_json(time_trace(path, top, progress))  # type: ignore[no-any-return]


def cmd_time(args: argparse.Namespace) -> int:
    from mixins.analysis.timing import NOTE

    files, bad = _expand(list(args.paths))
    traces, bad_files = _collect(_map(_time_job, files, (args.top,), args.jobs, not args.json))
    if args.json:
        render.print_json({"note": NOTE, "traces": traces})
    elif traces:
        from mixins.analysis.render_time import render_time

        render_time(traces)
    return TROUBLE if bad or bad_files else OK


# The ``attribute`` command (attribute_cmd) reads its inputs the same way.
map_files = _map
collect_results = _collect
run_job = _run_one
gather_files = _gather
