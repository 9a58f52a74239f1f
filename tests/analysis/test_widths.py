"""Every table command in a real pseudo-terminal at 60 … 200 columns: no number is ever cut or split.

Each case runs the real console script (``python -m mixins``) as a child whose stdout is a pty of the
given size (``TIOCSWINSZ``, and ``COLUMNS`` as a shell exports it), on the real vLLM capture/replay pair
and the demo's traces, then parses the box-drawn tables back into cells. Asserted:
no digit followed by ``…`` anywhere; a number cell is one line, and no cell breaks between two digits;
the key column holds exactly the names ``--json`` gives (runner names may lose the tail they all
share: still distinct); at 80 columns and more every table line fits; a table that left columns out
says which in the note line, and ``--wide`` at the same width shows them, with no note.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_analyzer
from on_a_terminal import run_on_a_terminal

from mixins.analysis.tables import short_runners
from tests.analysis.conftest import DATA, VLLM
from tests.built_once import built_once

REPO = Path(__file__).resolve().parents[2]
REPLAY = DATA / "vllm_decode_full_graph_replay_rank_0.json.gz"
DEFAULT_WIDTHS = (60, 100)
MORE_WIDTHS = (80, 120, 200)
_ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_NUMBER = re.compile(r"-?[\d,]+(\.\d+)?( %| \*| \(\d+%\)| [KMG]?i?B)?")
_NOTE = re.compile(r"not shown at (\d+) columns: (.*) \(--wide: all\)$")
_EVERY_ROW = "every row: "  # a title's account of the columns that read the same on every row


def _demo(d: Path, runner: str) -> Path:
    return d / f"cuda_graph_capture-{runner}-TP-0.json.gz"


# command -> (argv given the demo directory, key column header, where --json keeps the key names)
CASES: dict[str, Any] = {
    "ls": lambda d: ["ls", str(d)],
    "ls-long": lambda d: ["ls", "--long", str(d)],
    "summary": lambda d: ["summary", "--top", "3", str(VLLM), str(_demo(d, "DecodeCudaGraphRunner"))],
    "diff": lambda d: ["diff", str(_demo(d, "EAGLEDraftCudaGraphRunner")), str(_demo(d, "DecodeCudaGraphRunner"))],
    "check": lambda d: ["check", str(d)],
    "time": lambda d: ["time", str(d), str(VLLM)],
    "attribute": lambda d: ["attribute", "--top", "40", str(REPLAY), str(VLLM)],
    "clean": lambda d: ["clean", str(d)],
}


def run_in_pty(argv: list[str], columns: int) -> tuple[int, str]:
    """(exit code, stdout text) of the console script writing to a ``columns``-wide terminal."""
    env = dict(os.environ, COLUMNS=str(columns), LINES="50", TERM="xterm-256color", PYTHONPATH=str(REPO))
    env.pop("NO_COLOR", None)
    done = run_on_a_terminal(
        [sys.executable, "-m", "mixins", *argv], env, on_terminal=("stdout",), columns=columns, cwd=REPO
    )
    return done.returncode, _ESC.sub("", done.terminal.decode()).replace("\r\n", "\n")


def tables(text: str) -> list[dict[str, Any]]:
    """Each box-drawn table: header names (wrapped headers joined) and rows of cells, a cell being
    the list of its lines (a folded cell spans several)."""
    out: list[dict[str, Any]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("┏"):
            i += 1
            continue
        head: list[list[str]] = []
        start = i
        above: list[str] = []  # the title's lines (rich wraps a long title at spaces)
        while start - len(above) > 0 and lines[start - len(above) - 1].strip() and not (
                lines[start - len(above) - 1][:1] in "└┏│┃" or _NOTE.match(lines[start - len(above) - 1])):
            above.insert(0, lines[start - len(above) - 1].strip())
        title = " ".join(above)
        constant = title.split(_EVERY_ROW, 1)[1].split(" · ") if _EVERY_ROW in title else []
        i += 1
        while lines[i].startswith("┃"):
            head.append([c.strip() for c in lines[i].strip("┃").split("┃")])
            i += 1
        assert lines[i].startswith("┡"), lines[i]
        headers = [" ".join(filter(None, col)) for col in zip(*head, strict=True)]
        body: list[str] = []
        i += 1
        while not lines[i].startswith("└"):
            body.append(lines[i])
            i += 1
        # rows separated by rules (a folded cell spans lines) or one line each
        ruled = any(line.startswith("├") for line in body)
        rows: list[list[list[str]]] = []
        block: list[list[str]] = []
        for line in body + ["├"]:
            if line.startswith("├") or (block and not ruled):
                rows.append([list(c) for c in zip(*block, strict=True)])
                block = []
            if not line.startswith("├"):
                block.append([c.strip() for c in line.strip("│").split("│")])
        note = _NOTE.match(lines[i + 1]) if i + 1 < len(lines) else None
        out.append({"headers": headers, "rows": rows, "width": max(len(x) for x in lines[start:i + 1]),
                    "dropped": note.group(2).split(", ") if note else [], "constant": constant})
        i += 1
    return out


def cell_text(pieces: list[str]) -> str:
    return "".join(p for p in pieces if p)


def check_output(text: str, columns: int) -> list[dict[str, Any]]:
    assert not re.search(r"\d…", text), text
    found = tables(text)
    for table in found:
        for row in table["rows"]:
            assert len(row) == len(table["headers"]), (table["headers"], row)
            for pieces in row:
                shown = [p for p in pieces if p]
                if any(_NUMBER.fullmatch(p) for p in shown):
                    assert len(shown) == 1, pieces  # a number cell never folds
                for a, b in zip(shown, shown[1:], strict=False):
                    assert not (a[-1].isdigit() and b[0].isdigit()), pieces  # nor breaks inside a number
                assert "…" not in cell_text(pieces)
        if columns >= 80:
            assert table["width"] <= columns, table["headers"]
    return found


@pytest.fixture(scope="session")
def expected(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the key columns must hold, from --json (never affected by the terminal); once per run."""
    def js(*argv: str) -> Any:
        return json.loads(run_analyzer(*argv, "--json")[1])

    def build(_: Path) -> dict[str, Any]:
        ls = js("ls", str(demo_dir))["traces"]
        runners = [t["runner"] for t in ls]
        att = js("attribute", str(REPLAY), str(VLLM))
        summary = js("summary", str(VLLM))["traces"][0]
        return {
            "summary": sorted({s["label"] for s in summary["segments"]} | {"total"}),
            "ls": sorted({os.path.basename(t["path"]) for t in ls}),
            "check": sorted(set(runners)),
            "runners": runners,
            "attribute": sorted({op["name"] for op in att["ops"][:40]}),
        }

    built = built_once(tmp_path_factory, "widths-expected", build)
    return {key: value if key == "runners" else set(value) for key, value in built.items()}


def _same(a: str, b: str) -> bool:
    return a.replace(" ", "") == b.replace(" ", "")


def _case(command: str, columns: int, demo_dir: Path, expected: dict[str, Any]) -> None:
    argv = CASES[command](demo_dir)
    code, text = run_in_pty(argv, columns)
    assert code in (0, 1), text
    found = check_output(text, columns)
    if command in ("ls-long", "clean"):
        assert not found  # lines, not tables: rich wraps them at spaces (checked above: no cut number)
        return
    assert found, text
    short = short_runners(expected["runners"])
    if command in ("ls", "check", "attribute", "summary"):
        want = expected["check" if command == "check" else command]
        keys = [cell_text(r[0]) for r in found[0]["rows"]]
        shorter = {short[n] for n in want} if command == "check" else set()
        assert all(any(_same(k, n) for n in want | shorter) for k in keys), (keys, want)
        assert len(set(keys)) == len(keys) or command == "attribute"
    if command == "check" and any(_same(cell_text(r[0]), short[n]) for r in found[0]["rows"] for n in short
                                  if short[n] != n):
        assert len({cell_text(r[0]) for r in found[0]["rows"]}) == len(expected["check"])  # still distinct
    _, wide = run_in_pty([*argv, "--wide"], columns)
    assert "not shown at" not in wide
    wide_tables = check_output(wide, 0)
    assert len(wide_tables) == len(found)
    for narrow, full in zip(found, wide_tables, strict=True):
        assert not full["constant"]
        gone = [h for h in full["headers"] if h not in narrow["headers"]]
        moved = [h for h in gone if any(c.startswith(h + " ") for c in narrow["constant"])]
        assert sorted(narrow["dropped"]) == sorted(set(gone) - set(moved)), full
        assert len(moved) == len(narrow["constant"])
        for h in moved:  # in the title with the one text every row has
            (text,) = {cell_text(r[full["headers"].index(h)]) for r in full["rows"]}
            assert any(_same(c, f"{h} {text}") for c in narrow["constant"]), (h, text, narrow["constant"])
        assert all(h in full["headers"] for h in narrow["headers"])


@pytest.mark.parametrize(("command", "columns"), [
    *(pytest.param(c, w, id=f"{c}-{w}") for c in CASES for w in DEFAULT_WIDTHS),
    *(pytest.param(c, w, id=f"{c}-{w}", marks=pytest.mark.exhaustive) for c in CASES for w in MORE_WIDTHS),
])
def test_tables_never_cut_a_number(command: str, columns: int, demo_dir: Path, expected: dict[str, Any]) -> None:
    _case(command, columns, demo_dir, expected)


def _text_cells(row: list[list[str]]) -> tuple[str, ...]:
    """A row's cells that name it (every cell but the numbers)."""
    return tuple(t for t in map(cell_text, row) if not _NUMBER.fullmatch(t))


@pytest.mark.parametrize("columns", [80, 120])
def test_rows_that_differ_still_differ_on_a_terminal(columns: int, demo_dir: Path) -> None:
    """Before: at 80 and 120 columns ``attribute`` left out ``module`` and ``input dims`` (two rows read
    ``aten::addmm`` alone, five ``aten::mm`` with --top 40) and ``ls`` left out the runner and cut file
    names mid-word. Now numbers and columns that tell no row apart go first, a column that reads the same
    on every row goes into the title, and a file name folds after ``-``, ``.`` or ``_``."""
    _, text = run_in_pty(CASES["attribute"](demo_dir), columns)
    (ops,) = [t for t in check_output(text, columns) if "op" in t["headers"]]
    named = [_text_cells(r) for r in ops["rows"]]
    assert len(set(named)) == len(named), named
    _, text = run_in_pty(CASES["ls"](demo_dir), columns)
    (listing,) = check_output(text, columns)
    assert "runner" in listing["headers"]
    assert columns > 80 or "TP 0" in listing["constant"]  # the same on every row: said once, in the title
    for row in listing["rows"]:
        pieces = [p for p in row[0] if p]
        assert all(p[-1] in "-._" for p in pieces[:-1]), pieces


def test_kernel_names_are_whole_piped_and_with_wide() -> None:
    """Before: ``summary`` cut kernel names to 67 characters and ``...``, piped and with ``--wide``."""
    argv = [sys.executable, "-m", "mixins", "summary", "--top", "20", str(VLLM)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    doc = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, check=True).stdout)
    names = {k["name"] for s in doc["traces"][0]["segments"] for r in s["top"] for k in r["kernels"][:4]}
    assert max(map(len, names)) > 100
    piped = subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout
    assert all(n in piped for n in names) and "..." not in piped
    _, wide = run_in_pty([*argv[3:], "--wide"], 100)
    shown = "".join(cell_text(c).replace(" ", "") for t in check_output(wide, 0) for r in t["rows"] for c in r)
    assert all(n.replace(" ", "") in shown for n in names)
    _, narrow = run_in_pty(argv[3:], 100)
    assert "..." in narrow  # a terminal's table still cuts them, without --wide
