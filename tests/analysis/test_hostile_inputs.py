"""Hostile inputs to the analyzer, round 4: a file name that is not UTF-8, text without a length bound,
shapes that cost quadratic time (docs/DESIGN.md §7.1, §8.1).

Each test fails on the code before its fix; none is timed: the quadratic shapes are checked by counting
the steps a structure takes (or by its structure), the memory shapes by what the model keeps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from inprocess import run_analyzer

DATA = Path(__file__).resolve().parents[1] / "data"
VLLM_CAPTURE = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
VLLM_REPLAY = DATA / "vllm_decode_full_graph_replay_rank_0.json.gz"
SHOWN = "\\udcff"  # how every command shows the byte 0xff of a file name: as Python writes it


# -- a file name that is not UTF-8 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def undecodable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A folder holding the vLLM capture and replay under names with the byte 0xff (str with surrogates,
    as Python hands such names to the analyzer)."""
    folder = tmp_path_factory.mktemp("names")
    base = str(folder).encode()
    capture = (base + b"/capture\xff_rank_0.json.gz").decode(errors="surrogateescape")
    replay = (base + b"/replay\xff.json.gz").decode(errors="surrogateescape")
    shutil.copyfile(VLLM_CAPTURE, capture)
    shutil.copyfile(VLLM_REPLAY, replay)
    out = str(tmp_path_factory.mktemp("out"))
    return {"dir": str(folder), "capture": capture, "replay": replay, "out": out}


_EVERY_COMMAND: dict[str, tuple[list[str], str | None]] = {
    # id -> (argv with {capture}/{replay}/{dir}/{out} filled in, the output file the name must reach)
    "ls": (["ls", "{dir}"], None),
    "ls --long": (["ls", "--long", "{dir}"], None),
    "summary": (["summary", "{capture}"], None),
    "summary --json": (["summary", "--json", "{capture}"], None),
    "diff": (["diff", "{capture}", "{capture}"], None),
    "diff --json": (["diff", "--json", "{capture}", "{capture}"], None),
    "check": (["check", "-j", "1", "{capture}"], None),
    "check --json": (["check", "--json", "-j", "1", "{capture}"], None),
    "time": (["time", "-j", "1", "{capture}"], None),
    "time --json": (["time", "--json", "-j", "1", "{capture}"], None),
    "attribute": (["attribute", "-j", "1", "{replay}", "{capture}"], None),
    "attribute --json": (["attribute", "--json", "-j", "1", "{replay}", "{capture}"], None),
    "attribute --csv": (["attribute", "-j", "1", "--csv", "{out}/ops.csv", "{replay}", "{capture}"], "ops.csv"),
    "attribute --annotate": (["attribute", "-j", "1", "--annotate", "{out}/a.json", "{replay}", "{capture}"], None),
    "report": (["report", "-j", "1", "-o", "{out}/report.html", "{capture}"], "report.html"),
    "clean": (["clean", "{dir}"], None),
}


@pytest.mark.parametrize("name", list(_EVERY_COMMAND))
def test_every_command_shows_an_undecodable_file_name_escaped(undecodable: dict[str, str], name: str) -> None:
    """``report`` and ``attribute --csv`` died with ``UnicodeEncodeError … '\\udcff'`` (a traceback,
    exit 1); every command now runs and shows the byte as ``\\udcff``, never the raw surrogate."""
    argv, written = _EVERY_COMMAND[name]
    if name == "report":
        pytest.importorskip("plotly")
    rc, out, err = run_analyzer(*(a.format(**undecodable) for a in argv))
    assert rc == 0, err
    assert "\udcff" not in out + err  # a surrogate would be an encoding error on a real stdout
    if written is not None:
        text = (Path(undecodable["out"]) / written).read_bytes().decode()  # strict UTF-8
        assert SHOWN in text
    elif name not in ("clean", "attribute --annotate", "check", "attribute"):
        assert SHOWN in out
