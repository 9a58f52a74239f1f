"""The ``attribute`` sub-command: arguments, inputs (files, directories, TraceLens's index), ranks; captures
and replays read in worker processes, one big replay here while the captures load (docs/DESIGN.md §7,
"Attribution" step 6); and what it says beyond the op rows (step 7): the ``--group-by`` views, the
low-coverage warning, ``--csv`` and ``--annotate``'s copy of the replay."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
from collections.abc import Callable, Collection, Iterable
from contextlib import nullcontext
from typing import IO, Any, NamedTuple

import msgspec

from mixins.analysis import render
from mixins.analysis.commands.attribute_match import (
    Attribution,
    ReplayIndex,
    Row,
    annotation_key,
    attribute_index,
    index_replay,
)
from mixins.analysis.jobs import (
    collect_results,
    gather,
    map_files,
    run_one,
    trace_files,
    with_limits,
)
from mixins.analysis.model.events import DEVICE_CATEGORIES
from mixins.analysis.model.roles import CAPTURE, refusal, replay_ok, role_in
from mixins.analysis.model.windows import Capture, Window, load_capture, read_execution_details
from mixins.analysis.read.reader import TraceError, current_limits, holding, open_trace
from mixins.analysis.read.safe_io import STDOUT_NAMES, output_file
from mixins.analysis.serialise import json_value
from mixins.helptext import add_command, non_negative_int
from mixins.usage import DIFFERENT, OK, TROUBLE

__all__ = ["add", "cmd_attribute", "capture_inputs", "GROUP_BY", "GROUP_KEYS", "group_rows", "low_coverage",
           "write_annotated"]

Progress = Callable[[int, int], None]  # the reader's (bytes read, file size) callback: a bar on a terminal
Details = dict[str, tuple[int, str | None]]  # TraceLens execution details: file name -> (batch size, mode)
_DETAILS = "execution_details.json"
# A replay at least this big (file size) is read while the captures load: a worker costs ~20 ms to
# start, a 1 MiB gzip trace ~0.2 s to read.
OVERLAP_MIN_BYTES = 1 << 20


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "attribute",
        "Join a profile of serving (REPLAY: graph-replayed kernels have names and times but no op and no "
        "shapes) to the capture traces taken at start-up: each graph launch is matched to one capture "
        "window and verified by its kernel sequence, then every replayed kernel's GPU time goes to the "
        "op, module and input shapes that captured it. Graphs that do not verify are listed unattributed "
        "with the reason, never guessed. Eager kernels go to their own launching op.",
        [
            "capture-trace attribute replay-TP-0.json.gz graph_capture_profile/",
            "capture-trace attribute --json --csv ops.csv serving.json.gz capture-TP-0.json.gz",
            "capture-trace attribute --min-coverage 0.95 --annotate annotated.json.gz serving.json.gz caps/",
            "capture-trace attribute --group-by module serving.json.gz caps/",
        ],
        exit_codes=("attributed", "coverage below --min-coverage", "bad input or usage"),
    )
    p.add_argument("replay", metavar="REPLAY", help="replay (serving) trace, or a directory of them")
    p.add_argument("captures", metavar="CAPTURE", nargs="+", help="capture traces or directories of them")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--csv", metavar="FILE", help="also write the op rows (with --group-by: the grouped rows) as CSV")
    p.add_argument("--annotate", metavar="OUT", help="write the replay with capture_* args on attributed kernels")
    p.add_argument(
        "--min-coverage", type=float, metavar="F", help="exit 1 when attributed GPU time / total is below F (0..1)"
    )
    p.add_argument(
        "--top", type=non_negative_int("--top"), default=30, metavar="N", help="rows shown per replay in the table"
    )
    p.add_argument("--any-rank", action="store_true", help="attribute even when ranks differ")
    p.add_argument(
        "--group-by",
        choices=GROUP_BY,
        help="GPU time per op row (op), per nn.Module, per op and shape, or per runner and segment",
    )
    p.set_defaults(func=with_limits(cmd_attribute, p, jobs=True))


def _files(path: str) -> tuple[list[str], Collection[str]]:
    """A directory's traces, or the path itself (the reader reports a missing or bad file); and those
    found by listing a directory (``jobs.collect_results`` skips what among them is not a trace)."""
    return trace_files(path) if os.path.isdir(path) else ([path], [])


_REPLAY_WANTED = "REPLAY is a serving trace with graph launches (then its captures)"
_CAPTURES = "attribute"  # what CAPTURE arguments must be: roles.READS["attribute"]


def _capture_inputs(paths: list[str], replays: list[str]) -> tuple[dict[str, Details], set[str]]:
    """(capture file, TraceLens execution details of its folder) for each file or directory given, and the
    files found by listing; a replay in a capture directory (the demo writes them side by side) is not
    read as a capture."""
    out: dict[str, Details] = {}
    listed: set[str] = set()
    skip = {os.path.realpath(r) for r in replays}
    for p in paths:
        folder = p if os.path.isdir(p) else os.path.dirname(p) or "."
        details = read_execution_details(folder)
        found, from_listing = _files(p)
        files = [f for f in found if os.path.basename(f) != _DETAILS and os.path.realpath(f) not in skip]
        if not files and not os.path.isdir(p):
            raise _same_file(p)
        if not files:
            raise TraceError(p, "no capture traces (*.json.gz or *.json) in this directory")
        out.update((f, details) for f in files)
        listed.update(from_listing)
    return out, listed


def capture_inputs(paths: list[str], replay: str) -> dict[str, Details]:
    """:func:`_capture_inputs` for ``report``, which reads the captures itself (once, for three commands):
    a CAPTURE that is the replay is refused in one line, as ``attribute`` refuses it."""
    return _capture_inputs(paths, _files(replay)[0])[0]


def _capture_job(path: str, details: dict[str, Details], progress: Progress | None = None) -> Capture:
    return load_capture(path, details.get(path), progress)


class _Against(NamedTuple):
    """What every replay is matched against (all captures' windows, the capture paths) and how."""

    windows: list[Window]
    captures: list[str]
    annotate: bool
    rank: int | None  # the captures'
    any_rank: bool

    @classmethod
    def of(cls, args: argparse.Namespace, caps: list[Capture]) -> _Against:
        """Captures of several ranks are refused unless ``--any-rank``."""
        ranks = sorted({c.rank for c in caps if c.rank is not None})
        if len(ranks) > 1 and not args.any_rank:
            shown = ", ".join(f"{os.path.basename(c.path)}: {c.rank}" for c in caps if c.rank is not None)
            raise TraceError(caps[0].path, f"captures come from different ranks ({shown}); use --any-rank")
        windows = [w for c in caps for w in c.windows]
        return cls(windows, [c.path for c in caps], bool(args.annotate), ranks[0] if len(ranks) == 1 else None,
                   args.any_rank)

    def attribute(self, path: str, rp: ReplayIndex) -> Attribution:
        refused = _not_a_replay(path, rp)
        if refused is not None:
            raise refused
        if not self.any_rank and None not in (self.rank, rp.rank) and rp.rank != self.rank:
            raise TraceError(path, f"replay is rank {rp.rank}, captures are rank {self.rank} (--any-rank to "
                             "attribute anyway)")
        return attribute_index(rp, self.windows, self.captures, self.annotate)


def _replay_job(path: str, against: _Against, progress: Progress | None = None) -> Attribution:
    return against.attribute(path, index_replay(path, progress))


def _not_a_replay(path: str, rp: ReplayIndex, also_capture: bool = False) -> TraceError | None:
    """The one line for a REPLAY whose role is no replay's (None: a replay, or no role known); given as a
    CAPTURE too (``also_capture``), a replay is told so."""
    role = role_in(rp.identity)
    if replay_ok(role):
        instead = "it is REPLAY already: give its captures after it"
        return TraceError(path, refusal("", role, "attribute", instead)) if also_capture else None
    instead = "give it as CAPTURE, the replay first" if role.role == CAPTURE else _REPLAY_WANTED
    return TraceError(path, refusal("", role, "attribute", instead), wrong_role=role.role)


# -- what attribute says beyond its op rows ---------------------------------------------------------


# view -> the --json fields of an op row that identify a group (op: every row is its own group)
GROUP_KEYS: dict[str, tuple[str, ...]] = {
    "op": ("name", "module", "input_dims", "input_types", "source", "runner", "segment"),
    "module": ("module",),
    "shape": ("name", "input_dims", "input_types"),  # TraceLens's by-shape summary: op + dims + types
    "segment": ("source", "runner", "segment"),
}
GROUP_BY = tuple(GROUP_KEYS)


def group_rows(res: Attribution, by: str) -> list[dict[str, Any]]:
    """The ``--group-by`` rows: the op rows themselves (``op``), or op rows summed per ``GROUP_KEYS[by]``
    (``ops``: how many each holds)."""
    if by == "op":
        return [r.as_json() for r in res.rows]
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in res.rows:  # a Row's attributes are named as its --json fields
        groups.setdefault(tuple(getattr(r, f) for f in GROUP_KEYS[by]), []).append(r)
    out = []
    for key, rows in groups.items():
        us, count = sum(r.gpu_time_us for r in rows), sum(r.count for r in rows)
        row: dict[str, Any] = {f: json_value(v) if f in ("input_dims", "input_types") else v
                               for f, v in zip(GROUP_KEYS[by], key, strict=True)}
        row.update(ops=len(rows), kernels=sum(r.kernels for r in rows), count=count, gpu_time_us=round(us, 3),
                   mean_us=round(us / count, 3) if count else 0.0)
        out.append((-us, repr(key), row))
    return [row for *_, row in sorted(out, key=lambda x: x[:2])]


WARN_BELOW = 0.5  # graph kernels or GPU time attributed below this share: say so, with the likely cause

# a reason attribute_match gives (a substring of it) -> what it most likely means
_CAUSES = (
    ("no capture windows", "the captures hold no CUDA-graph capture window: wrong capture (a trace of "
     "serving, or one profiled without graph capture)?"),
    ("is in no capture window", "the replayed kernels are in none of the captures' windows: wrong capture "
     "or runner (another model, runner or build)?"),
    ("not found in order", "the replayed kernel sequences are not the captured ones: wrong capture or runner "
     "(another model, runner or build)?"),
    ("capture window has", "the replayed graphs are longer than any captured one: wrong capture or runner?"),
    ("no kernel name", "the captured launches have no kernel names: a capture taken without its eager "
     "warm-up pass (which names them)?"),
    ("more than one way", "the replayed graphs run fewer kernels than their capture windows launched, and "
     "which launches they skipped is not clear: a capture of another build?"),
    ("ambiguous", "several capture windows verify each graph: give only the replayed runner's captures, or "
     "mark the replay's iterations with bs=N / runner=NAME ranges"),
    ("work limit", "verification stopped at its work limit: give only the replayed runner's captures"),
    ("no launching runtime call", "device work without its launching runtime call: was the replay "
     "profiled with CPU activity (ProfilerActivity.CPU)?"),
    ("outside any cpu_op", "kernels launched outside any cpu_op: was the replay profiled with CPU ops?"),
)


def low_coverage(res: Attribution, capture_rank: int | None) -> str | None:
    """The warning for a result with under half its graph kernels or GPU time attributed, naming the
    likely cause; None when coverage is fine. ``capture_rank``: the captures' rank."""
    if not res.graph_kernels:  # graph launches without their kernels (``roles``: a replay has launches)
        return (
            f"{res.replay}: no graph kernel recorded for its graph launches: nothing of a CUDA graph to "
            "attribute (was the replay profiled with CUDA activity?)"
        )
    graph = res.graph_kernels_attributed / res.graph_kernels
    share = res.share
    if graph >= WARN_BELOW and share >= WARN_BELOW:
        return None
    said = f"{res.graph_kernels_attributed:,}/{res.graph_kernels:,} graph kernels and "
    head = f"{res.replay}: only {said}{100 * share:.1f} % of GPU time attributed"
    if res.gpu_time_us <= 0:
        return f"{res.replay}: no GPU time to attribute: was the replay profiled with CUDA activity?"
    if res.rank is not None and capture_rank is not None and res.rank != capture_rank:
        return f"{head}: the replay is rank {res.rank}, the captures rank {capture_rank}: wrong rank?"
    missed = [u for u in res.unattributed if graph >= WARN_BELOW or u.source == "graph"] or res.unattributed
    if not missed:
        return head
    top = max(missed, key=lambda u: u.gpu_time_us)
    cause = next((c for s, c in _CAUSES if s in top.reason), f"most unattributed work: {top.reason}")
    return f"{head}: {cause}"


_CSV_TOTALS = ("kernels", "count", "gpu_time_us", "mean_us")  # and the op rows' min, max and verified


def _csv_cell(field: str, value: Any) -> Any:
    """dims/types as compact JSON; strict numbers, as in --json: an overflowing total is empty."""
    if field in ("input_dims", "input_types"):
        return "" if value is None else json.dumps(value, separators=(",", ":"))
    return "" if isinstance(value, float) and not math.isfinite(value) else value


def _write_csv(path: str, results: list[Attribution], by: str) -> int:
    """Write the ``--csv`` file (through ``safe_io.output_file``): each ``--json`` op row (or ``--group-by``
    row) with its replay, under a header that does not depend on the rows; how many rows."""
    import csv  # only ``--csv`` needs it: not part of every run's start-up

    totals = (*_CSV_TOTALS, "min_us", "max_us", "verified") if by == "op" else ("ops", *_CSV_TOTALS)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=("replay", *GROUP_KEYS[by], *totals), lineterminator="\n")
    w.writeheader()
    rows = [{k: _csv_cell(k, v) for k, v in {"replay": res.replay, **row}.items()}
            for res in results for row in group_rows(res, by)]
    w.writerows(rows)
    with output_file(path) as f:
        f.write(buf.getvalue().encode(errors="backslashreplace"))  # a file-name byte as \udcff
    return len(rows)


_MAY_MATCH = tuple(f'"{c}"'.encode() for c in DEVICE_CATEGORIES)  # a device event's text holds its cat


def _annotated(raw: bytes, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> bytes | None:
    """``raw`` (one event's JSON) with its capture_* args added; None when it gains none."""
    if not any(tag in raw for tag in _MAY_MATCH):
        return None
    ev = msgspec.json.decode(raw)  # the reader parsed this element already: it is valid and bounded
    if not isinstance(ev, dict) or ev.get("cat") not in DEVICE_CATEGORIES:
        return None
    args = ev.get("args")
    if not isinstance(args, dict):
        return None
    key = annotation_key(args.get("correlation"), args.get("graph node id"), ev.get("ts"), ev.get("name") or "")
    got = annotations.get(key)
    if got is None:
        return None
    args.update(got)
    return msgspec.json.encode(ev)


class _Copy:
    """Writes the document back, member by member, as the reader streams it."""

    def __init__(self, out: IO[bytes] | gzip.GzipFile) -> None:
        self.out = out
        self.ahead = b"{"  # before the next member (or the end): "]" first while traceEvents is open
        self.sep: bytes | None = None  # inside traceEvents: what goes before its next element

    def member(self, key: str, raw: bytes | None) -> None:
        self.out.write(self.ahead + msgspec.json.encode(key) + b": " + (b"[" if raw is None else raw))
        self.ahead = b"], " if raw is None else b", "
        self.sep = b"" if raw is None else None  # raw None: traceEvents, its elements follow

    def events(self, items: list[bytes]) -> None:
        if items and self.sep is not None:
            self.out.write(self.sep + b", ".join(items))
            self.sep = b", "

    def end(self) -> None:
        self.out.write(b"{}" if self.ahead == b"{" else self.ahead.removesuffix(b", ") + b"}")


def write_annotated(replay: str, out: str, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> int:
    """Write ``replay`` with ``annotations`` added to ``out`` (gzip if it ends in .gz: no name, no time); how
    many kernels gained args. A bad replay is a TraceError naming it; nothing is left at ``out`` then."""
    with output_file(out) as f, (gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=f, mtime=0)
                                 if out.endswith(".gz") else nullcontext(f)) as sink:
        stream = open_trace(replay)
        copy = _Copy(sink)
        stream.on_member = copy.member
        done = 0
        for raws in stream.events(msgspec.Raw):
            items = [bytes(r) for r in raws]
            for n, text in enumerate(items):
                if (new := _annotated(text, annotations)) is not None:
                    done += 1
                    items[n] = new
            copy.events(items)
        copy.end()
        return done


def _check_options(args: argparse.Namespace, replays: list[str]) -> None:
    for option, path in (("--csv", args.csv), ("--annotate", args.annotate)):
        if path == "":  # not "no output": a variable that expanded to nothing
            raise TraceError(option, "expected a file name ('-' for stdout), got an empty one")
    if args.min_coverage is not None and not 0.0 <= args.min_coverage <= 1.0:
        raise TraceError("--min-coverage", f"expected a fraction between 0 and 1, got {args.min_coverage}")
    if args.annotate and len(replays) != 1:
        raise TraceError(args.annotate, f"--annotate takes one replay trace, got {len(replays)}")


def _captures_read(pairs: Iterable[tuple[str, Any]], listed: Collection[str]) -> list[Capture]:
    """The captures read (``jobs.collect_results``); :class:`_Reported` when one was bad."""
    caps, bad = collect_results(pairs, listed, reads=_CAPTURES)
    if bad:
        raise _Reported()
    return caps


def _overlaps(args: argparse.Namespace, replays: list[str]) -> bool:
    """Whether to read the one replay here while the captures load in workers."""
    if len(replays) != 1 or args.jobs == 1 or (args.jobs == 0 and (os.cpu_count() or 1) < 2):
        return False
    try:
        return os.path.getsize(replays[0]) >= OVERLAP_MIN_BYTES
    except OSError:
        return False  # the reader reports it, in the usual order


def _attribute_overlapped(
    args: argparse.Namespace, replay: str, listed_replays: Collection[str]
) -> tuple[list[Attribution], bool, int | None]:
    """Captures in worker processes, the replay indexed here meanwhile (a byte bar on a terminal), then
    the captures still loading (a files bar); errors in the sequential order (captures first, then the
    replay), each one line."""
    from concurrent.futures import ProcessPoolExecutor  # imported only when a pool is used (~20 ms)

    inputs, listed = _capture_inputs(list(args.captures), [replay])
    paths = list(inputs)
    workers = max(1, min(len(paths), (args.jobs or os.cpu_count() or 2) - 1))
    limits = current_limits()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_one, limits, _capture_job, p, inputs) for p in paths]
        with render.progress_bytes(not args.json and render.big_file(replay), os.path.basename(replay)) as bar:
            rp = run_one(limits, index_replay, replay, bar)
        with render.progress_files(not args.json, len(paths)) as tick:
            caps = _captures_read(gather(paths, futures, tick), listed)
    against = _Against.of(args, caps)
    if isinstance(rp, TraceError):
        raise rp
    done = run_one(limits, against.attribute, replay, rp)
    return (*collect_results([(replay, done)], listed_replays), against.rank)


def _attribute_all(
    args: argparse.Namespace, replays: list[str], listed_replays: Collection[str], caps: list[Capture] | None
) -> tuple[list[Attribution], bool, int | None]:
    """Results, whether any file was bad, and the captures' rank; ``caps``: the captures already read."""
    if caps is None and _overlaps(args, replays):
        return _attribute_overlapped(args, replays[0], listed_replays)
    if caps is None:
        inputs, listed = _capture_inputs(list(args.captures), replays)
        caps = _captures_read(map_files(_capture_job, list(inputs), (inputs,), args.jobs, not args.json), listed)
    against = _Against.of(args, caps)
    results = map_files(_replay_job, replays, (against,), args.jobs, not args.json)
    return (*collect_results(results, listed_replays), against.rank)


class _Reported(Exception):
    """Errors were already printed, one line each."""


def _same_file(path: str) -> TraceError:
    """The one line for a file given as both REPLAY and CAPTURE: its role when it is no replay (a
    capture given twice), else that it is the replay."""
    rp = run_one(current_limits(), index_replay, path)
    if isinstance(rp, TraceError):
        return rp
    same = TraceError(path, "is the replay trace: give the capture traces (files, or their directory)")
    return _not_a_replay(path, rp, also_capture=True) or same


def _outputs(args: argparse.Namespace, results: list[Attribution], capture_rank: int | None) -> None:
    """Files first (a write that fails is exit 2 before anything is printed), then stdout, then
    stderr's lines: what was written where (not for stdout or stderr), and a warning per result with low
    coverage."""
    wrote: list[tuple[str, str]] = []
    if args.csv:
        rows = _write_csv(args.csv, results, args.group_by or "op")
        wrote.append((args.csv, f"{rows:,} rows"))
    if args.annotate:
        res = results[0]
        done = write_annotated(res.replay, args.annotate, res.annotations or {})
        wrote.append((args.annotate, f"the annotated replay ({done:,} kernels annotated)"))
    by = args.group_by  # without --group-by, the result itself: the default JSON stays as it was
    views = [r if by is None else {**r.as_json(), "groups": {"by": by, "rows": group_rows(r, by)}} for r in results]
    if args.json:
        render.print_json(views[0] if len(views) == 1 else {"replays": views})
    else:
        render.render_attribute(views, args.top)
    for path, what in wrote:
        if path not in STDOUT_NAMES:
            render.error(f"wrote {what} to {path}", "info")
    for res in results:
        warning = low_coverage(res, capture_rank)
        if warning is not None:
            render.error(warning, "warning")


def cmd_attribute(args: argparse.Namespace, caps: list[Capture] | None = None) -> int:
    """``caps``: the CAPTURE arguments already read (``report``'s: :func:`capture_inputs`, then
    ``windows.capture_of`` on its one model of each); else they are read here."""
    try:
        replays, listed = _files(args.replay)
        _check_options(args, replays)
        # --annotate reads the replay twice: both times from one descriptor opened here (reader.holding)
        with holding(replays[0]) if args.annotate else nullcontext():
            results, bad, rank = _attribute_all(args, replays, listed, caps)
            if results:  # over a directory, the good replays are still shown when one is bad
                _outputs(args, results, rank)
            if bad:
                return TROUBLE
    except TraceError as exc:
        render.error(str(exc))
        return TROUBLE
    except _Reported:
        return TROUBLE
    if args.min_coverage is not None:  # no graph kernel at all is never a pass
        low = [r for r in results if r.gpu_time_us and r.share < args.min_coverage]
        if low or any(not r.gpu_time_us or not r.graph_kernels for r in results):
            return DIFFERENT  # exit 1: coverage below --min-coverage
    return OK
