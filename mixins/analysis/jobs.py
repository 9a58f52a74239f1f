"""Files in, results out, for every analyzer command: which files a path names, each read in a worker
process under the reader's limits, and one line per file that failed (whatever went wrong: the other
files are still reported)."""

from __future__ import annotations

import argparse
import functools
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from mixins.analysis import render
from mixins.analysis.model.identity import is_trace_name, names_a_trace
from mixins.analysis.read.reader import MAX_TEXT, Limits, TraceError, current_limits, texts_cut, using_limits
from mixins.analysis.tables import wide_tables
from mixins.formats import SUBDIR
from mixins.helptext import int_at_least, non_negative_int

if TYPE_CHECKING:
    from concurrent.futures import Future


def with_limits(
    cmd: Callable[[argparse.Namespace], int], p: argparse.ArgumentParser, tables: bool = True, jobs: bool = False
) -> Callable[..., int]:
    """Give ``p`` the --max-events / --max-value-mib / --max-distinct-mib options (``-j/--jobs`` where it reads
    files in worker processes, ``--wide`` where it prints ``tables``); ``cmd`` runs under those limits and that
    table policy (``tables.wide_tables``)."""
    d = Limits()
    if jobs:
        p.add_argument("-j", "--jobs", type=non_negative_int("--jobs"), default=0, metavar="N",
                       help="worker processes; 0: one per core")
    if tables:
        p.add_argument(
            "--wide", action="store_true",
            help="on a narrow terminal keep every table column (default: leave the least important out, with a note)",
        )
    for flag, default, metavar, what in (
        ("--max-events", d.max_events, "N", "a trace with more traceEvents elements"),
        ("--max-value-mib", d.max_value_bytes >> 20, "MIB", "a larger key, top-level value or event"),
        ("--max-distinct-mib", d.max_distinct_bytes >> 20, "MIB",
         "a trace whose distinct names, shapes, threads and ranges would take more"),
    ):
        p.add_argument(flag, type=int_at_least(1, flag), default=default, metavar=metavar,
                       help=f"refuse {what} (default {default:,})")

    @functools.wraps(cmd)
    def run(args: argparse.Namespace) -> int:
        limits = Limits(args.max_events, args.max_value_mib << 20, args.max_distinct_mib << 20)
        with using_limits(limits), wide_tables(tables and args.wide):
            return cmd(args)

    return run


DIR_HELP = (
    f"directory of *.json[.gz] traces (or one trace file); a directory with {SUBDIR}/ and no trace-named "
    "files of its own (a profiler directory) is searched there"
)


def trace_files(directory: str) -> tuple[list[str], list[str]]:
    """The traces ``directory`` names, and those of them found by listing (``collect_results`` may skip these):
    a file is itself, not listed; a directory's visible ``*.json[.gz]`` files, sorted. TraceError if none."""
    if os.path.isfile(directory):
        return [directory], []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        raise TraceError(directory, "no such file" if is_trace_name(directory) else "no such directory") from None
    except OSError as exc:
        said = {NotADirectoryError: "not a directory", PermissionError: "permission denied"}.get(type(exc))
        raise TraceError(directory, said or exc.strerror or str(exc)) from None
    except ValueError:
        raise TraceError(directory, "invalid path (contains a NUL byte)") from None
    files = [os.path.join(directory, n) for n in names if is_trace_name(n)]
    files = [f for f in files if not os.path.isdir(f)]
    # the profiler dir itself was given: its own JSON (server_args.json, a config) names no trace
    if not any(map(names_a_trace, files)) and SUBDIR in names and os.path.isdir(os.path.join(directory, SUBDIR)):
        return trace_files(os.path.join(directory, SUBDIR))
    if not files:
        raise TraceError(directory, "no traces (*.json.gz or *.json) in this directory")
    return files, files


def expand_paths(paths: list[str], each: bool = False) -> tuple[list[str], set[str], bool]:
    """Files as given, directories as their traces (also returned as ``listed``), and whether a directory
    was bad (reported). ``each``: every path through :func:`trace_files` (a missing one is bad here, not
    when read), and the first bad one ends the listing (``check``: nothing is read)."""
    files, listed, bad = [], set[str](), False
    for path in paths:
        if not each and not os.path.isdir(path):
            files.append(path)
            continue
        try:
            found, found_listed = trace_files(path)
        except TraceError as exc:
            render.error(str(exc))
            bad = True
            if each:
                break
            continue
        files += found
        listed.update(found_listed)
    return files, listed, bad


def run_one(limits: Limits, job: Callable[..., Any], path: str, *extra: Any) -> Any:
    """``job``'s result, or the TraceError to report: never an exception, so one file cannot stop the rest."""
    before = texts_cut()
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
    finally:
        if cut := texts_cut() - before:  # one note for a trace whose texts the reader cut
            said = f"{cut:,} text{'s' * (cut != 1)} longer than {MAX_TEXT:,} characters cut"
            render.error(f"{path}: {said} (shown ending in '…[N more characters]')", "note")


def map_files(
    job: Callable[..., Any], paths: list[str], extra: tuple[Any, ...], jobs: int, show: bool
) -> Iterable[tuple[str, Any]]:
    """Run ``job`` over paths (parallel when several), yielding (path, result or TraceError) in order."""
    workers = min(len(paths), jobs if jobs > 0 else (os.cpu_count() or 1))
    limits = current_limits()
    if workers <= 1:
        for p in paths:
            with render.progress_bytes(show and render.big_file(p), os.path.basename(p)) as bar:
                more = (bar,) if bar is not None else ()
                yield p, run_one(limits, job, p, *extra, *more)
        return
    from concurrent.futures import ProcessPoolExecutor  # ~20 ms with multiprocessing: only when used

    with ProcessPoolExecutor(max_workers=workers) as pool, render.progress_files(show, len(paths)) as tick:
        futures = [pool.submit(run_one, limits, job, p, *extra) for p in paths]
        yield from gather(paths, futures, tick)


def gather(
    paths: list[str], futures: list[Future[Any]], tick: Callable[[], None] | None = None
) -> Iterable[tuple[str, Any]]:
    """(path, result or TraceError) for each submitted ``run_one``, in order; a dead worker is a TraceError."""
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


def collect_results(
    pairs: Iterable[tuple[str, Any]],
    listed: Collection[str] = (),
    failed: list[str] | None = None,
    reads: str | None = None,
) -> tuple[list[Any], bool]:
    """Results in order, and whether any file was bad (each reported on stderr as it comes; ``failed``
    collects their paths). A file a folder listing found (``listed``) that is JSON but no trace, and not
    trace-named, or of a role the command ``reads`` does not read (``roles.READS``), is skipped with
    one INFO line; a folder where all were skipped is an error (docs/DESIGN.md §7, §7.4)."""
    from mixins.analysis.model.roles import READS, ROLE_NAMES, refusal, role_in

    good, bad = [], False
    skipped: dict[str, Counter[str]] = {}  # folder -> why its files were skipped -> how many
    answered: set[str] = set()  # folders with a file read or reported
    for path, res in pairs:
        folder = os.path.dirname(path)
        if isinstance(res, TraceError) and res.not_a_trace and path in listed and not names_a_trace(path):
            render.error(f"{path}: skipped, not a trace ({res.message})", "info")
            skipped.setdefault(folder, Counter())[""] += 1
            continue
        if reads is not None and not isinstance(res, TraceError):
            identity = getattr(res[-1] if isinstance(res, tuple) else res, "identity", None)  # report's: last
            if identity is not None and identity.role not in READS[reads]:
                role = role_in(identity)
                res = TraceError(path, refusal("", role, reads), wrong_role=role.role)
        if isinstance(res, TraceError) and res.wrong_role is not None and path in listed:
            render.error(f"{path}: skipped: {res.message}", "info")
            skipped.setdefault(folder, Counter())[ROLE_NAMES[res.wrong_role]] += 1
            continue
        answered.add(folder)
        if isinstance(res, TraceError):
            render.error(str(res))
            bad = True
            if failed is not None:
                failed.append(path)
        else:
            good.append(res)
    for folder, why in skipped.items():
        if folder not in answered:
            said = "; ".join(
                f"{n} {what or 'JSON file'}{'s' * (n != 1)} skipped" + ("" if what else ": not a trace")
                for what, n in why.items()
            )
            wanted = "traces" if set(why) == {""} or reads is None else " or ".join(sorted(READS[reads])) + " traces"
            render.error(str(TraceError(folder or ".", f"no {wanted} in this directory ({said})")))
            bad = True
    return good, bad
