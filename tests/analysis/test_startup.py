"""The console script's entry point, ``mixins.cli.main``: every analyzer command wired through it (the other
tests run its parser in-process, ``inprocess.py``, not ``main``), and what a run imports.

Why the imports are tested: the exporter's imports (wrapt, asyncio via wrapt, inspect …) and the record
builders cost ~0.3 s per run, more than attributing the real vLLM pair itself; the package ``__init__`` files
resolve their public names lazily so that an analysis run never pays for them. The analyzer's classes are
msgspec Structs, not dataclasses: generating 25 dataclasses cost ~30 ms of every run.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from mixins.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_NEEDED = (
    "mixins.export", "mixins.capture_trace", "wrapt", "mixins.analysis.model.records", "rich", "torch", "dataclasses"
)
# --version and --help: no command's module, no importlib.metadata (the version is read from our dist-info)
NO_COMMAND = ("mixins.demo", "mixins.doctor", "mixins.metadata", "mixins.analysis", "importlib.metadata", "numpy",
              "msgspec", "rich", "typing")
OTHER_COMMANDS = tuple(f"mixins.analysis.commands.{name}" for name in ("attribute", "time", "report", "memory", "diff",
                                                                       "ls")) + ("mixins.demo", "mixins.doctor")


def _cli(argv: list[str]) -> str:
    return f"from mixins.cli import main\nsys.argv[1:] = {argv!r}\ntry:\n    main()\nexcept SystemExit:\n    pass"


# code run in a fresh interpreter -> (what it prints: all of it (str) or among it (tuple), modules it loads,
# prefixes of modules it must not load)
IMPORTS = {
    "library": ("from mixins.analysis.commands.attribute_match import attribute_replay\n"
                "from mixins.analysis.model.windows import load_capture\nfrom mixins.analysis.serialise import to_json",
                (), ["mixins.analysis.commands.attribute_match"], NOT_NEEDED),
    # ``attribute --json`` to stdout writes no file and no CSV: ``tempfile`` (~2 ms, with ``random``) and ``csv``
    # are imported by the commands that write one, not by every run
    "attribute --json": ("from mixins.cli import build_parser\nbuild_parser('attribute').parse_args(['attribute', "
                         "'--json', 'replay.json', 'capture.json'])",
                         (), ["mixins.analysis.commands.attribute_match"], (*NOT_NEEDED, "tempfile", "csv")),
    # answered from ``mixins.cli`` and ``mixins.usage`` alone: not even argparse
    "--version": (_cli(["--version"]), f"capture-trace {version('sglang-capture-trace')}\n", [],
                  (*NO_COMMAND, "argparse")),
    "--help": (_cli(["--help"]), ("summary ", "attribute"), [], NO_COMMAND),
    "summary --help": (_cli(["summary", "--help"]), ("usage: capture-trace summary",),
                       ["mixins.analysis.commands.summary"], OTHER_COMMANDS),
    # the analyzer's public names (``mixins``' own: tests/core/test_lazy_imports.py) load records on first use
    "public names": ("import mixins.analysis\nfrom mixins.analysis import TraceError, TraceRecord, load_record\n"
                     "assert callable(load_record) and issubclass(TraceError, Exception)\ntry:\n"
                     "    mixins.analysis.nothing_here\nexcept AttributeError as exc:\n"
                     "    assert 'nothing_here' in str(exc)\nelse:\n    raise SystemExit('no AttributeError')",
                     (), ["mixins.analysis.model.records"], ()),
}


@pytest.mark.parametrize("case", list(IMPORTS))
def test_what_a_run_imports(case: str) -> None:
    code, printed, loaded, not_loaded = IMPORTS[case]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)  # the .pth start-up hook stays off
    script = f"import sys\n{code}\nsys.stderr.write('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    modules = set(done.stderr.split())
    if isinstance(printed, str):
        assert done.stdout == printed
    else:
        assert [p for p in printed if p not in done.stdout] == [], done.stdout
    assert sorted(m for m in loaded if m not in modules) == []
    assert sorted(m for m in modules if m.startswith(not_loaded)) == []


def run_main(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_each_analyzer_command_through_main(cpu_traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "ls", cpu_traces["same"], "--json")
    assert rc == 0 and err == ""
    assert [t["tp_rank"] for t in json.loads(out)["traces"]] == [0, 1]
    rc, out, _ = run_main(capsys, "summary", cpu_traces["r0"], "--json", "--top", "2")
    assert rc == 0 and [s["label"] for s in json.loads(out)["traces"][0]["segments"]] == ["bs=1", "bs=4", "(outside)"]
    assert run_main(capsys, "diff", cpu_traces["r0"], cpu_traces["r1"])[0] == 0
    assert run_main(capsys, "diff", cpu_traces["r0"], cpu_traces["r1_bad"])[0] == 1
    assert run_main(capsys, "check", cpu_traces["same"], "-j", "1")[0] == 0
    rc, out, _ = run_main(capsys, "check", cpu_traces["diverged"], "-j", "1")
    assert rc == 1 and out


def test_bad_input_and_usage_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "summary", tmp_path / "missing.json.gz")
    assert rc == 2 and out == "" and err.startswith("capture-trace: error: ")
    for argv in ([], ["no-such-command"]):  # no command, an unknown one
        with pytest.raises(SystemExit) as usage:
            main(argv)
        assert usage.value.code == 2
    capsys.readouterr()


def test_doctor_is_wired(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", raising=False)
    rc, out, _ = run_main(capsys, "doctor", "--no-import")
    assert rc == 1  # the switch is off
    assert "activation routes" in out and "problem: SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE is unset" in out


def test_memory_reads_each_snapshot_as_every_command_reads_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot that passes the layout check but holds a time no float can hold (an int of 400 digits) is
    that file's one line, and the next snapshot is still reported (``jobs.run_one``): it was a traceback."""
    good = {"segments": [], "device_traces": [[{"action": "alloc", "size": 512, "time_us": 1}]]}
    bad = {"segments": [], "device_traces": [[{"action": "alloc", "size": 512, "time_us": 10**400}]]}
    paths = [tmp_path / f"cuda_graph_memory-R-TP-{rank}.pickle" for rank in (0, 1)]
    for path, snapshot in zip(paths, (bad, good), strict=True):
        path.write_bytes(pickle.dumps(snapshot))
    rc, out, err = run_main(capsys, "memory", tmp_path, "--json")
    assert rc == 2 and [s["path"] for s in json.loads(out)["snapshots"]] == [str(paths[1])]
    assert err == (f"capture-trace: error: {paths[0]}: cannot analyse "
                   "(OverflowError: int too large to convert to float); please report this\n")
