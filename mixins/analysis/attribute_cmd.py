"""The ``attribute`` sub-command: arguments, inputs (files, directories, TraceLens's index), ranks, outputs.

Exit codes as the other commands: 0 a result, 1 coverage below ``--min-coverage``, 2 bad input.
Captures and replays are read in worker processes (one per file, like ``check``); workers return
windows and attribution rows, never raw events.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from typing import Any

from mixins.analysis import render
from mixins.analysis.annotate import write_annotated, write_atomic
from mixins.analysis.attribute import Attribution, attribute_replay
from mixins.analysis.cli import collect_results, map_files, trace_files, with_limits
from mixins.analysis.reader import TraceError
from mixins.analysis.windows import Capture, Window, load_capture, read_execution_details

__all__ = ["add_attribute_command", "cmd_attribute", "csv_rows", "CSV_COLUMNS"]

OK, LOW_COVERAGE, TROUBLE = 0, 1, 2
Details = dict[str, tuple[int, str | None]]  # TraceLens execution details: file name -> (batch size, mode)
_DETAILS = "execution_details.json"
CSV_COLUMNS = (
    "replay",
    "name",
    "module",
    "input_dims",
    "input_types",
    "source",
    "runner",
    "segment",
    "kernels",
    "count",
    "gpu_time_us",
    "mean_us",
    "min_us",
    "max_us",
    "verified",
)


def add_attribute_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "attribute",
        help="put each replayed CUDA-graph kernel on the capture op, module and shapes that launched it",
    )
    p.add_argument("replay", metavar="REPLAY", help="replay (serving) trace, or a directory of them")
    p.add_argument("captures", metavar="CAPTURE", nargs="+", help="capture traces or directories of them")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--csv", metavar="FILE", help="also write the op rows as CSV")
    p.add_argument("--annotate", metavar="OUT", help="write the replay with capture_* args on attributed kernels")
    p.add_argument(
        "--min-coverage", type=float, metavar="F", help="exit 1 when attributed GPU time / total is below F (0..1)"
    )
    p.add_argument("--top", type=int, default=30, metavar="N", help="rows shown per replay in the table (default 30)")
    p.add_argument("--any-rank", action="store_true", help="attribute even when ranks differ")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="worker processes (default: all cores)")
    p.set_defaults(func=with_limits(cmd_attribute, p))


def _files(path: str) -> list[str]:
    """A directory's traces, or the path itself (the reader reports a missing or bad file)."""
    return trace_files(path) if os.path.isdir(path) else [path]


def _capture_inputs(paths: list[str]) -> dict[str, Details]:
    """(capture file, TraceLens execution details of its folder) for each file or directory given."""
    out: dict[str, Details] = {}
    for p in paths:
        folder = p if os.path.isdir(p) else os.path.dirname(p) or "."
        details = read_execution_details(folder)
        files = [f for f in _files(p) if os.path.basename(f) != _DETAILS]
        if not files:
            raise TraceError(p, "no capture traces (*.json.gz or *.json) in this directory")
        out.update((f, details) for f in files)
    return out


def _capture_job(path: str, details: dict[str, Details]) -> Capture:
    return load_capture(path, details.get(path))


def _replay_job(
    path: str, windows: list[Window], captures: list[str], annotate: bool, rank: int | None, any_rank: bool
) -> Attribution:
    res = attribute_replay(path, windows, captures, annotate)
    if not any_rank and rank is not None and res.rank is not None and res.rank != rank:
        raise TraceError(path, f"replay is rank {res.rank}, captures are rank {rank} (--any-rank to attribute anyway)")
    return res


def _capture_rank(caps: list[Capture], any_rank: bool) -> int | None:
    ranks = sorted({c.rank for c in caps if c.rank is not None})
    if len(ranks) > 1 and not any_rank:
        shown = ", ".join(f"{os.path.basename(c.path)}: {c.rank}" for c in caps if c.rank is not None)
        raise TraceError(caps[0].path, f"captures come from different ranks ({shown}); use --any-rank")
    return ranks[0] if len(ranks) == 1 else None


def csv_rows(results: list[Attribution]) -> list[dict[str, Any]]:
    """The ``--csv`` rows: each ``--json`` op row with its replay, dims/types as compact JSON."""
    rows = []
    for res in results:
        for op in res.as_json()["ops"]:
            row = {"replay": res.replay, **op}
            for k in ("input_dims", "input_types"):
                row[k] = "" if row[k] is None else json.dumps(row[k], separators=(",", ":"))
            rows.append({k: row[k] for k in CSV_COLUMNS})
    return rows


def _write_csv(path: str, results: list[Attribution]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(csv_rows(results))
    write_atomic(path, buf.getvalue().encode())


def _check_options(args: argparse.Namespace, replays: list[str]) -> None:
    if args.min_coverage is not None and not 0.0 <= args.min_coverage <= 1.0:
        raise TraceError("--min-coverage", f"expected a fraction between 0 and 1, got {args.min_coverage}")
    if args.top < 0:
        raise TraceError("--top", f"must be >= 0, got {args.top}")
    if args.annotate and len(replays) != 1:
        raise TraceError(args.annotate, f"--annotate takes one replay trace, got {len(replays)}")


def _load_captures(args: argparse.Namespace) -> tuple[list[Capture], int | None]:
    inputs = _capture_inputs(list(args.captures))
    caps, bad = collect_results(map_files(_capture_job, list(inputs), (inputs,), args.jobs, False))
    if bad:
        raise _Reported()
    return caps, _capture_rank(caps, args.any_rank)


class _Reported(Exception):
    """Errors were already printed, one line each."""


def _outputs(args: argparse.Namespace, results: list[Attribution]) -> None:
    if args.csv:
        _write_csv(args.csv, results)
    if args.annotate:
        res = results[0]
        write_annotated(res.replay, args.annotate, res.annotations or {})
    if args.json:
        render.print_json(results[0] if len(results) == 1 else {"replays": results})
    else:
        render.render_attribute(results, args.top)


def cmd_attribute(args: argparse.Namespace) -> int:
    try:
        replays = _files(args.replay)
        _check_options(args, replays)
        caps, rank = _load_captures(args)
        windows = [w for c in caps for w in c.windows]
        paths = [c.path for c in caps]
        extra = (windows, paths, bool(args.annotate), rank, args.any_rank)
        results, bad = collect_results(map_files(_replay_job, replays, extra, args.jobs, False))
        if bad:
            return TROUBLE
        _outputs(args, results)
    except TraceError as exc:
        render.error(str(exc))
        return TROUBLE
    except _Reported:
        return TROUBLE
    if args.min_coverage is not None:
        low = [r for r in results if r.gpu_time_us and r.attributed_us / r.gpu_time_us < args.min_coverage]
        if low or any(not r.gpu_time_us for r in results):
            return LOW_COVERAGE
    return OK
