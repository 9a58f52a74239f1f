"""Output: ``rich`` tables for people, plain JSON for machines, progress only on a terminal."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from mixins.analysis.commands.compare import GroupCheck, SegmentDiff

from msgspec.structs import replace

from mixins.analysis.serialise import to_json
from mixins.analysis.tables import UNWRAPPED, Cell, Col, Us, duration_text, print_table, shows_whole_cells
from mixins.formats import BS, label_text
from mixins.one_line import one_line

# rich is imported by the functions that draw (~45 ms), so ``--json`` output and errors never load it.

__all__ = ["console", "print_json", "error", "safe", "render_ls", "render_temps", "render_ls_long", "size_text",
           "count_text", "render_summary", "render_diff", "render_check", "render_attribute", "progress_bytes",
           "progress_files"]

PROGRESS_MIN_BYTES = 4 << 20  # below this (gzip size) a file reads in about a second or less: no bar


def big_file(path: str) -> bool:
    """Whether reading ``path`` earns a byte progress bar (on a terminal): ``jobs.map_files``, ``attribute``."""
    try:
        return os.path.isfile(path) and os.path.getsize(path) >= PROGRESS_MIN_BYTES
    except OSError:
        return False


def console() -> Console:
    """Stdout console: on a terminal its width; piped, never wrapping, whatever a stale ``COLUMNS`` says."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """rich's own exits 1, which ``check``/``diff`` use for "different": let ``cli`` decide (141)."""
            self.quiet = True
            raise BrokenPipeError

    if sys.stdout.isatty():
        return _Console(highlight=False, emoji=False)
    return _Console(width=UNWRAPPED, highlight=False, no_color=True, soft_wrap=True, emoji=False)


def safe(value: object) -> str:
    """The one escape of untrusted text before a terminal sees it (docs/DESIGN.md §7.2)."""
    from rich.markup import escape

    return escape(one_line(value))


def print_json(obj: Any) -> None:
    """Every ``--json`` output: through ``to_json``, then strict JSON: a non-finite number (json's ``NaN`` /
    ``Infinity``, read back by ``parse_constant``) becomes null, with one warning."""
    bad: list[str] = []
    value = json.loads(json.dumps(to_json(obj)), parse_constant=bad.append)  # append returns None: null
    if bad:
        error(f"{len(bad):,} non-finite number(s) (an overflowing total?) written as null", "warning")
    sys.stdout.write(json.dumps(value, indent=2, allow_nan=False) + "\n")


def error(message: str, kind: str = "error") -> None:
    """The one-line error format: ``capture-trace: error: <path>: <what>``."""
    print(f"capture-trace: {kind}: {one_line(message)}", file=sys.stderr)


def size_text(n: float) -> str:
    """The one unit system of every output: binary (B, KiB, MiB, GiB), one decimal above bytes."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def count_text(n: int | None) -> str:
    """The one number format: thousands separated by commas; blank for nothing."""
    return "" if n is None else f"{n:,}"


def cut(items: list[str], keep: int) -> list[str]:
    """At most ``keep`` items, then "N more" so a cut list never looks complete."""
    return items if len(items) <= keep else items[:keep] + [f"{len(items) - keep:,} more"]


def who(t: dict[str, Any]) -> str:
    """A trace's writer in a few words: ``runner TP 0 PP 1 #2`` (the ``--json`` identity fields)."""
    tp, pp, dp, index = t.get("tp_rank"), t.get("pp_rank"), t.get("dp_rank"), t.get("capture_index", 1)
    parts = (f"TP {tp}" if tp is not None else "", f"PP {pp}" if pp else "", f"DP {dp}" if dp is not None else "",
             f"#{index}" if index != 1 else "")
    return " ".join(x for x in (t.get("runner") or "?", *parts) if x)


def _rank(value: int | None) -> str:
    return "" if value is None else str(value)


LS_COLUMNS = (
    Col("file", fold=32),  # never left out: folds at - and . (32: our longest runner name and its -)
    Col("runner", "key", runner=True),
    Col("TP", "num"),
    Col("PP", "num", drop=4),
    Col("idx", "num", drop=3),
    Col("identity", drop=1),
    Col("size", "num"),
    Col("events", "num"),
    Col("segments", fold=16, drop=2),
)


def render_ls(rows: list[dict[str, Any]]) -> None:
    table: list[list[Cell]] = []
    for t in rows:
        labels = [s["label"] for s in t["segments"]]
        table.append([
            os.path.basename(t["path"]), t.get("runner") or "?", _rank(t.get("tp_rank")), _rank(t.get("pp_rank")),
            str(t.get("capture_index", "")), t["identity_source"], size_text(t["size"]), count_text(t["events"]),
            f"{len(labels)}: {', '.join(cut(labels, 8))}",
        ])
    print_table(console(), LS_COLUMNS, table, runners=[t.get("runner") or "?" for t in rows])


def render_temps(temps: list[Any], cleaning: bool = False) -> None:
    """Staging directories of exports (``output_dir.StaleTemp``), one plain line each, not through rich
    (~1 ms a line; a directory can hold 100k planted names). ``ls`` promises only what ``clean`` does."""
    lines = []
    for t in temps:
        kept = "" if t.kept is None else f" ({t.kept})"
        if t.removed:
            state = "its process is gone: removed"
        elif not t.process_gone:
            state = f"pid {t.pid} on {t.host} is running or not on this host: kept"
        elif cleaning:
            state = f"its process is gone; not removed{kept}"
        else:
            state = f"its process is gone: stale; clean keeps it{kept}" if kept else (
                "its process is gone: stale (capture-trace clean removes it)")
        lines.append(one_line(f"temporary {t.name}: {size_text(t.bytes)}, {state}") + "\n")
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


def _of(rank: Any, size: Any) -> str:
    return f"{'?' if rank is None else rank} of {'?' if size is None else size}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _long_fields(t: dict[str, Any]) -> list[tuple[str, str]]:
    """``ls --long``: one trace's recorded metadata as (field, text) rows."""
    m = t.get("metadata")
    segments = [s["label"] for s in t["segments"]]
    rows = [("file", f"{size_text(t['size'])}, {count_text(t['events'])} events, "
             + f"{_plural(len(segments), 'segment')}: " + ", ".join(cut(segments, 12)))]
    if m is None:
        source = t["identity_source"]
        found = "no identity anywhere" if source == "none" else f"identity from {source}: {who(t)}"
        return rows + [("metadata", f"none in the trace ({found})")]
    runner = t.get("runner") or "?"
    sizes = [f"TP {_of(t.get('tp_rank'), m.get('tp_size'))}", f"PP {_of(t.get('pp_rank'), m.get('pp_size'))}"]
    sizes += [f"{k.split('_')[0].upper()} size {m[k]}" for k in ("dp_size", "world_size") if m.get(k) is not None]
    ranks, named = m.get("rank_source"), m.get("size_source")
    sources = "nothing named them: one process assumed" if ranks == named == "default" else (
        f"ranks from {ranks or '?'}, sizes from {named or 'nowhere: unknown'}")
    bs = m.get("capture_bs")
    names = (("sglang", "sglang_version"), ("torch", "torch_version"), ("sglang-capture-trace", "package_version"))
    versions = ", ".join(f"{name} {m.get(key) or 'not installed'}" for name, key in names)
    return rows + [
        ("runner", runner + (f" ({m['runner_class']})" if m.get("runner_class") else "")),
        ("ranks", f"{', '.join(sizes)} ({sources})"),
        ("capture", f"#{t.get('capture_index', 1)}" + (f", batch sizes {', '.join(map(str, bs))}" if bs else "")),
        ("versions", versions),
        ("host", f"{m.get('hostname') or '?'}, pid {m.get('pid') or '?'}, device {m.get('device') or '?'}"),
        ("time", str(m.get("time_utc") or "?")),
    ]


def render_ls_long(rows: list[dict[str, Any]]) -> None:
    out = console()
    for n, t in enumerate(rows):
        out.print(("\n" if n else "") + safe(t["path"]))
        for name, text in _long_fields(t):
            out.print(f"  {name:<9} {safe(text)}")


# (summary field, column): the last to go at narrow widths first (drop)
_COLS = (
    ("events", Col("events", "num")),
    ("cpu_ops", Col("cpu_ops", "num")),
    ("signatures", Col("sigs", "num", drop=5)),
    ("launches", Col("launches", "num")),
    ("graph_launches", Col("graph", "num", drop=4)),
    ("kernels", Col("kernels", "num")),
    ("linked_kernels", Col("linked", "num", drop=6)),
    ("unnamed_launches", Col("unnamed", "num", drop=3)),
    ("attributed_launches", Col("attributed", "num", drop=2)),
    ("ops_without_shapes", Col("no shapes", "num", drop=1)),
)
_TOP_COLUMNS = (
    Col("count", "num"),
    Col("op", "key", fold=20),
    Col("input dims", fold=16, drop=2),
    Col("input types", fold=16, drop=1),
    Col("kernels", fold=30, drop=3),
)


KERNEL_NAME_CUT = 70  # a terminal's table shows this much of a kernel name; piped and --wide: all of it


def _kernel_text(k: dict[str, Any], whole: bool) -> str:
    name = k["name"] if k["name"] is not None else "<unknown: captured launch>"
    if not whole and len(name) > KERNEL_NAME_CUT:
        name = name[: KERNEL_NAME_CUT - 3] + "..."
    smem, regs = k.get("shared_memory"), k.get("registers")
    bits = (f"grid={tuple(k['grid'])}" if k.get("grid") else "", f"block={tuple(k['block'])}" if k.get("block") else "",
            f"smem={smem}" if smem is not None else "", f"regs={regs}" if regs is not None else "",
            "[attributed by alignment]" if k.get("attributed") else "")
    return f"· {k['count']}× " + " ".join([name, *filter(None, bits)])  # one per line in the cell: the dot starts each


def render_summary(traces: list[dict[str, Any]]) -> None:
    from rich.text import Text

    out = console()
    runs = len({t.get("run") for t in traces}) > 1
    whole = shows_whole_cells(out)
    for t in traces:
        run = f"run {safe(t['run'])}  " if runs else ""
        out.print(f"{run}[bold]{safe(t['path'])}[/bold]  {safe(who(t))}  (a {t.get('role') or '?'}; identity: "
                  f"{t['identity_source']}, segments: {safe(t['segment_source'])}, {t['events']:,} events)")
        rows: list[list[Cell]] = [[s["label"], *(f"{s[k]:,}" for k, _ in _COLS)] for s in t["segments"]]
        tot = t["totals"]
        rows.append([Text("total", style="bold"), f"{t['events']:,}", *(f"{tot[k]:,}" for k, _ in _COLS[1:])])
        print_table(out, (Col("segment", "key", fold=8), *(c for _, c in _COLS)), rows)
        for s in t["segments"]:
            if not s["top"]:  # --top 0, or no op
                continue
            top = [[f"{row['count']:,}", row["op"], _shown(row["input_dims"]), _shown(row["input_types"]),
                    cut([_kernel_text(k, whole) for k in row["kernels"]], 4) or "-"] for row in s["top"]]
            title = f"{s['label']}: top {len(s['top'])} signatures by kernels launched, then calls"
            print_table(out, _TOP_COLUMNS, top, title=title)


def _shown(value: Any) -> str:
    """Compact JSON for a table cell, '-' when the trace had nothing."""
    return "-" if value in (None, "", []) else json.dumps(value, separators=(",", ":"))


def _op_text(op: dict[str, Any] | None) -> str:
    if op is None:
        return "(end of sequence)"
    text = f"{op['op']} dims={_shown(op['input_dims'])} types={_shown(op['input_types'])}"
    conc = op.get("concrete")
    if conc is not None and (not isinstance(conc, list) or any(v not in ("", None) for v in conc)):
        text += f" concrete={_shown(conc)}"
    if op.get("kernels"):
        names = [k["name"] or "<unknown>" for k in op["kernels"]]
        text += f" kernels={names}"
    return text


def render_diff(path_a: str, path_b: str, diffs: list[SegmentDiff]) -> None:
    out = console()
    out.print(safe(f"A: {path_a}"))
    out.print(safe(f"B: {path_b}"))
    cols = (Col("segment", "key", fold=8), Col("status"), *(Col(c, "num") for c in ("ops A", "ops B", "first diff",
                                                                             "added", "removed", "changed")))
    status = {"only_a": "only in A", "only_b": "only in B"}
    print_table(out, cols, [[d.label, status.get(d.status, d.status), *map(count_text, (
        d.ops_a, d.ops_b, d.first_diff, d.added, d.removed, d.changed))] for d in diffs])
    for d in diffs:
        if d.status != "changed":
            continue
        out.print(f"[bold]{safe(d.label)}[/bold]: first difference at op #{count_text(d.first_diff)}")
        out.print(safe(f"  A: {_op_text(d.at_a)}"))
        out.print(safe(f"  B: {_op_text(d.at_b)}"))
        if not d.aligned:
            out.print("  (sequences too long to align: added/removed are counted as multisets)")
        for kind, total in (("changed", d.changed), ("removed", d.removed), ("added", d.added)):
            for ex in d.examples[kind]:
                out.print(safe(f"  changed ({', '.join(ex['fields'])}): {_op_text(ex['a'])}  ->  {_op_text(ex['b'])}"
                               if kind == "changed" else f"  {kind + ':':<9}{_op_text(ex)}"))
            shown = sum(ex.get("count", 1) for ex in d.examples[kind])  # unaligned examples carry counts
            if total > shown:
                out.print(f"  … {total - shown:,} more {kind}")


def _group(g: GroupCheck, *more: str) -> str:
    """A check group in words: runner, batch size, DP replica, then ``more``."""
    bs = label_text([(BS, g.bs)]) if g.bs is not None else ""
    return " ".join(x for x in (g.runner or "?", bs, f"DP {g.dp_rank}" if g.dp_rank is not None else "", *more) if x)


def _result(g: GroupCheck) -> str:
    if g.ok:
        return "ok" if g.complete is not None or g.members[0][0] is None else "ok (size unknown)"
    if g.divergences:
        return f"DIVERGENT ({_plural(len(g.divergences), 'rank')})"
    return "INCOMPLETE" if g.complete is False else "PROBLEM"


CHECK_COLUMNS = (
    Col("runner", "key", runner=True),
    Col("PP", justify="left"),
    Col("idx", justify="left"),
    Col("TP ranks", fold=12),
    Col("TP size", justify="left"),
    Col("result", "key"),
)


def render_check(groups: list[GroupCheck]) -> None:
    out = console()
    runs = len({g.run for g in groups}) > 1  # ranks are checked per run: say which, when there are several
    rows: list[list[Cell]] = [[
        *([g.run or "?"] if runs else []), _group(g), _rank(g.pp_rank), str(g.capture_index),
        ", ".join("?" if r is None else str(r) for r, _ in g.members), _rank(g.tp_size), _result(g),
    ] for g in groups]
    columns = (Col("run", "key", fold=12), *CHECK_COLUMNS) if runs else CHECK_COLUMNS
    print_table(out, columns, rows, runners=[g.runner or "?" for g in groups])
    for g in groups:
        run = f"{g.run}: " if runs and g.run else ""
        head = safe(run + _group(g, f"PP {g.pp_rank}" if g.pp_rank is not None else "", f"#{g.capture_index}"))
        for p in g.problems:
            out.print(f"[bold]{head}[/bold]: {safe(p)}")
        for d in g.divergences:
            ref_rank = g.members[0][0]
            if d.position is None:
                out.print(f"[bold]{head}[/bold]: segment {safe(repr(d.segment))} present on only one of TP {ref_rank} "
                          f"({d.ops_reference:,} ops) and TP {d.rank} ({d.ops_other:,} ops)")
                continue
            where = f"in {safe(repr(d.segment))} at op #{d.position:,}"
            out.print(f"[bold]{head}[/bold]: TP {d.rank} diverges from TP {ref_rank} {where}")
            out.print(safe(f"  TP {ref_rank}: {_op_text(d.reference)}"))
            out.print(safe(f"  TP {d.rank}: {_op_text(d.other)}"))
        for n in g.notes:
            out.print(f"{head}: note: {safe(n)}")


# an attribute row's key fields as columns (one definition; the op view shows all but runner)
_ATTRIBUTE_KEY_COLUMNS = {
    "name": Col("op", "key", fold=24),
    "module": Col("module", fold=14, drop=9),
    "input_dims": Col("input dims", fold=16, drop=8),
    "input_types": Col("input types", fold=16, drop=1),
    "source": Col("source", drop=2),
    "runner": Col("runner", runner=True),
    "segment": Col("segment", fold=13, drop=7),
}
_OP_KEYS = tuple(f for f in _ATTRIBUTE_KEY_COLUMNS if f != "runner")
# what every attribute table shows after its keys and counts
_MEASURE_COLUMNS = (
    Col("kernels", "num", drop=5),
    Col("count", "num", drop=4),
    Col("total", "num", time="total"),
    Col("mean", "num", time="mean", drop=3),
    Col("share", "num", drop=6),
)
# ``--group-by`` views: the fields a view groups by (attribute.GROUP_KEYS) are its keys, never left out
_GROUP_KEY_COLUMNS = {f: replace(c, kind="key", drop=None) for f, c in _ATTRIBUTE_KEY_COLUMNS.items()}
_GROUP_TITLE = {"module": "modules", "shape": "op shapes", "segment": "runners and segments"}


def render_attribute(results: list[Any], top: int = 30) -> None:
    """Per replay: ops (or a ``--group-by`` view) by GPU time, a coverage line, what stayed unattributed."""
    out = console()
    for result in results:
        res = to_json(result)
        group = res.get("groups")
        if group is not None and group["by"] != "op":  # module, shape, segment: its key columns and totals
            shown, what, counts = group["rows"], _GROUP_TITLE[group["by"]], ["ops", "kernels", "count"]
            keys = [k for k in _GROUP_KEY_COLUMNS if shown and k in shown[0]]
            cols = (*(_GROUP_KEY_COLUMNS[k] for k in keys), Col("ops", "num"))
        else:
            shown, what, counts, keys = res["ops"], "ops", ["kernels", "count"], list(_OP_KEYS)
            cols = tuple(_ATTRIBUTE_KEY_COLUMNS[k] for k in keys)
        total = res["coverage"]["gpu_time_us"] or 1.0
        cells: list[list[Cell]] = [[  # the keys (shapes as compact JSON; '-': no segment, no runner), the counts
            *(_shown(r[k]) if k in ("input_dims", "input_types") else ("-" if r[k] is None else r[k]) for k in keys),
            *(f"{r[c]:,}" for c in counts), Us(r["gpu_time_us"]), Us(r["mean_us"]),
            f"{100 * r['gpu_time_us'] / total:.1f} %",
        ] for r in shown[:top]]
        print_table(out, (*cols, *_MEASURE_COLUMNS), cells, title=f"{res['replay']}: {what} by GPU time",
                    runners=[r["runner"] for r in shown[:top] if r.get("runner")])
        if len(shown) > top:
            out.print(f"… {len(shown) - top} more rows (--json or --csv for all)")
        cov = res["coverage"]
        share = 100 * cov["attributed_us"] / cov["gpu_time_us"] if cov["gpu_time_us"] else 0.0
        of = f"{duration_text(cov['attributed_us'])} of {duration_text(cov['gpu_time_us'])}"
        if not cov["graph_kernels"]:  # eager work alone says nothing of the graphs: never "100 %"
            line = f"no graph kernel in this replay, nothing of a CUDA graph attributed (eager GPU time {of})"
        else:
            kernels = f"{cov['graph_kernels_attributed']:,}/{cov['graph_kernels']:,}"
            line = f"graph kernels {kernels} attributed, GPU time {of} ({share:.1f} %)"
        out.print(f"coverage: {line}")
        for u in res["unattributed"]:
            out.print(f"unattributed ({u['source']}): {u['kernels']:,} kernels, {duration_text(u['gpu_time_us'])} "
                      f"in {u['launches']:,} launch(es): {safe(u['reason'])}")


@contextmanager
def progress_bytes(enabled: bool, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A byte progress bar on stderr for one large file, or None (not a terminal / --json)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    columns = ("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextmanager
def progress_files(enabled: bool, total: int) -> Iterator[Callable[[], None] | None]:
    """A files-done bar on stderr for directory commands, or None."""
    if not enabled or not sys.stderr.isatty() or total < 2:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress

    columns = ("reading traces", BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("traces", total=total)
        yield lambda: bar.advance(task)
