"""Output: ``rich`` tables for people, plain JSON for machines, progress only on a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from mixins.analysis.compare import GroupCheck, SegmentDiff
from mixins.analysis.serialise import to_json

__all__ = [
    "console",
    "print_json",
    "error",
    "one_line",
    "render_ls",
    "render_temps",
    "render_summary",
    "render_diff",
    "render_check",
    "render_attribute",
    "progress_bytes",
    "progress_files",
]

PROGRESS_MIN_BYTES = 4 << 20  # below this (gzip size) a file reads in about a second or less: no bar


def console() -> Console:
    """Stdout console; a wide fixed width when piped so tables are not squeezed to 80 columns."""
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(width=200, highlight=False, no_color=True)


def print_json(obj: Any) -> None:
    """Every ``--json`` output: results through the one serialisation path, then indented JSON."""
    sys.stdout.write(json.dumps(to_json(obj), indent=2) + "\n")


def one_line(text: str) -> str:
    """``text`` with every non-printable character escaped as Python writes it (``\\n``, ``\\x00``,
    ``\\u2028``, an undecodable file-name byte as ``\\udcff``): a path with a newline stays one line."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def error(message: str) -> None:
    """The one-line error format of the issue: ``capture-trace: error: <path>: <what>``."""
    print(f"capture-trace: error: {one_line(message)}", file=sys.stderr)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


def _who(t: dict[str, Any]) -> str:
    parts = [t.get("runner") or "?"]
    if t.get("tp_rank") is not None:
        parts.append(f"TP {t['tp_rank']}")
    if t.get("pp_rank"):
        parts.append(f"PP {t['pp_rank']}")
    if t.get("capture_index", 1) != 1:
        parts.append(f"#{t['capture_index']}")
    return " ".join(parts)


def render_ls(rows: list[dict[str, Any]]) -> None:
    table = Table(title=None, show_lines=False)
    for col, just in (
        ("file", "left"),
        ("runner", "left"),
        ("TP", "right"),
        ("PP", "right"),
        ("idx", "right"),
        ("identity", "left"),
        ("size", "right"),
        ("events", "right"),
        ("segments", "left"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for t in rows:
        labels = [s["label"] for s in t["segments"]]
        shown = ", ".join(labels[:8]) + (f", … (+{len(labels) - 8})" if len(labels) > 8 else "")
        table.add_row(
            t["path"].rsplit("/", 1)[-1],
            t.get("runner") or "?",
            "" if t.get("tp_rank") is None else str(t["tp_rank"]),
            "" if t.get("pp_rank") is None else str(t["pp_rank"]),
            str(t.get("capture_index", "")),
            t["identity_source"],
            _size(t["size"]),
            f"{t['events']:,}",
            f"{len(labels)}: {shown}",
        )
    console().print(table)


def render_temps(temps: list[Any]) -> None:
    """Staging directories of exports (``mixins.output_dir.StaleTemp``): one line each."""
    for t in temps:
        if t.removed:
            state = "its process is gone: removed"
        elif t.process_gone:
            state = "its process is gone; not removed (another user's)"
        else:
            state = f"pid {t.pid} on {t.host} is running or not on this host: kept"
        console().print(f"temporary {t.name}: {_size(t.bytes)}, {state}", markup=False, highlight=False)


_COLS = (
    ("events", "events"),
    ("cpu_ops", "cpu_ops"),
    ("signatures", "sigs"),
    ("launches", "launches"),
    ("graph_launches", "graph"),
    ("kernels", "kernels"),
    ("linked_kernels", "linked"),
    ("unnamed_launches", "unnamed"),
    ("attributed_launches", "attributed"),
    ("ops_without_shapes", "no shapes"),
)


def _kernel_text(k: dict[str, Any]) -> str:
    name = k["name"] if k["name"] is not None else "<unknown: captured launch>"
    if len(name) > 70:
        name = name[:67] + "..."
    bits = [name]
    if k.get("grid"):
        bits.append(f"grid={tuple(k['grid'])}")
    if k.get("block"):
        bits.append(f"block={tuple(k['block'])}")
    if k.get("shared_memory") is not None:
        bits.append(f"smem={k['shared_memory']}")
    if k.get("registers") is not None:
        bits.append(f"regs={k['registers']}")
    if k.get("attributed"):
        bits.append("[attributed by alignment]")
    return f"{k['count']}× " + " ".join(bits)


def render_summary(traces: list[dict[str, Any]], top: int) -> None:
    out = console()
    for t in traces:
        out.print(
            f"[bold]{t['path']}[/bold]  {_who(t)}  (identity: {t['identity_source']}, "
            f"segments: {t['segment_source']}, {t['events']:,} events)"
        )
        table = Table()
        table.add_column("segment")
        for _, title in _COLS:
            table.add_column(title, justify="right")
        for s in t["segments"]:
            table.add_row(s["label"], *(f"{s[k]:,}" for k, _ in _COLS))
        tot = t["totals"]
        table.add_row("[bold]total[/bold]", f"{t['events']:,}", *(f"{tot[k]:,}" for k, _ in _COLS[1:]))
        out.print(table)
        if top <= 0:
            continue
        for s in t["segments"]:
            if not s["top"]:
                continue
            tt = Table(title=f"{s['label']}: top {len(s['top'])} signatures", title_justify="left")
            tt.add_column("count", justify="right")
            tt.add_column("op")
            tt.add_column("input dims")
            tt.add_column("input types")
            tt.add_column("kernels")
            for row in s["top"]:
                tt.add_row(
                    f"{row['count']:,}",
                    row["op"],
                    _shown(row["input_dims"]),
                    _shown(row["input_types"]),
                    "\n".join(_kernel_text(k) for k in row["kernels"][:4]) or "-",
                )
            out.print(tt)


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
    out.print(f"A: {path_a}\nB: {path_b}")
    table = Table()
    for col in ("segment", "status", "ops A", "ops B", "first diff", "added", "removed", "changed"):
        table.add_column(col, justify="left" if col in ("segment", "status") else "right")
    for d in diffs:
        table.add_row(
            d.label,
            d.status.replace("only_a", "only in A").replace("only_b", "only in B"),
            f"{d.ops_a:,}",
            f"{d.ops_b:,}",
            "" if d.first_diff is None else str(d.first_diff),
            str(d.added),
            str(d.removed),
            str(d.changed),
        )
    out.print(table)
    for d in diffs:
        if d.status != "changed":
            continue
        out.print(f"[bold]{d.label}[/bold]: first difference at op #{d.first_diff}")
        out.print(f"  A: {_op_text(d.at_a)}")
        out.print(f"  B: {_op_text(d.at_b)}")
        if not d.aligned:
            out.print("  (sequences too long to align: added/removed are counted as multisets)")
        for ex in d.examples["changed"]:
            out.print(f"  changed ({', '.join(ex['fields'])}): {_op_text(ex['a'])}  ->  {_op_text(ex['b'])}")
        for ex in d.examples["removed"]:
            out.print(f"  removed: {_op_text(ex)}")
        for ex in d.examples["added"]:
            out.print(f"  added:   {_op_text(ex)}")


def render_check(groups: list[GroupCheck]) -> None:
    out = console()
    table = Table()
    for col in ("runner", "PP", "idx", "TP ranks", "result"):
        table.add_column(col)
    for g in groups:
        ranks = ", ".join("?" if r is None else str(r) for r, _ in g.members)
        result = "ok" if g.ok else f"DIVERGENT ({len(g.divergences)} rank(s))" if g.divergences else "PROBLEM"
        table.add_row(g.runner or "?", str(g.pp_rank), str(g.capture_index), ranks, result)
    out.print(table)
    for g in groups:
        head = f"{g.runner or '?'} PP {g.pp_rank} #{g.capture_index}"
        for p in g.problems:
            out.print(f"[bold]{head}[/bold]: {p}")
        for d in g.divergences:
            ref_rank = g.members[0][0]
            if d.position is None:
                out.print(
                    f"[bold]{head}[/bold]: segment {d.segment!r} present on only one of TP {ref_rank} "
                    f"({d.ops_reference} ops) and TP {d.rank} ({d.ops_other} ops)"
                )
                continue
            where = f"in {d.segment!r} at op #{d.position}"
            out.print(f"[bold]{head}[/bold]: TP {d.rank} diverges from TP {ref_rank} {where}")
            out.print(f"  TP {ref_rank}: {_op_text(d.reference)}")
            out.print(f"  TP {d.rank}: {_op_text(d.other)}")
        for n in g.notes:
            out.print(f"{head}: note: {n}")


def _attribute_table(res: dict[str, Any], top: int) -> Table:
    table = Table(title=f"{res['replay']}: ops by GPU time", title_justify="left")
    for col in ("op", "module", "input dims", "input types", "source", "segment", "kernels", "count"):
        table.add_column(col, justify="right" if col in ("kernels", "count") else "left")
    for col in ("total µs", "mean µs", "share"):
        table.add_column(col, justify="right")
    total = res["coverage"]["gpu_time_us"] or 1.0
    for op in res["ops"][:top]:
        table.add_row(
            op["name"] if len(op["name"]) <= 60 else op["name"][:57] + "...",
            op["module"],
            _shown(op["input_dims"]),
            _shown(op["input_types"]),
            op["source"],
            op["segment"] or "-",
            f"{op['kernels']:,}",
            f"{op['count']:,}",
            f"{op['gpu_time_us']:,.1f}",
            f"{op['mean_us']:,.1f}",
            f"{100 * op['gpu_time_us'] / total:.1f} %",
        )
    return table


def render_attribute(results: list[Any], top: int = 30) -> None:
    """Per replay: ops ranked by GPU time, a coverage line, and what stayed unattributed and why."""
    out = console()
    for result in results:
        res = to_json(result)
        out.print(_attribute_table(res, top))
        if len(res["ops"]) > top:
            out.print(f"… {len(res['ops']) - top} more rows (--json or --csv for all)")
        cov = res["coverage"]
        share = 100 * cov["attributed_us"] / cov["gpu_time_us"] if cov["gpu_time_us"] else 0.0
        out.print(
            f"coverage: graph kernels {cov['graph_kernels_attributed']:,}/{cov['graph_kernels']:,} attributed, "
            f"GPU time {cov['attributed_us']:,.1f}/{cov['gpu_time_us']:,.1f} µs ({share:.1f} %)"
        )
        for u in res["unattributed"]:
            out.print(
                f"unattributed ({u['source']}): {u['kernels']:,} kernels, {u['gpu_time_us']:,.1f} µs "
                f"in {u['launches']:,} launch(es): {u['reason']}"
            )


@contextmanager
def progress_bytes(enabled: bool, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A byte progress bar on stderr for one large file, or None (not a terminal / --json)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@contextmanager
def progress_files(enabled: bool, total: int) -> Iterator[Callable[[], None] | None]:
    """A files-done bar on stderr for directory commands, or None."""
    if not enabled or not sys.stderr.isatty() or total < 2:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress

    with Progress(
        "reading traces", BarColumn(), MofNCompleteColumn(), console=Console(stderr=True), transient=True
    ) as bar:
        task = bar.add_task("traces", total=total)
        yield lambda: bar.advance(task)
