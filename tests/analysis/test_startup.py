"""Start-up cost of the analysis library: the attribution path imports only what it uses.

Why a test: the exporter's imports (wrapt, asyncio via wrapt, inspect …) and the record builders
cost ~0.3 s per run, more than attributing the real vLLM pair itself; the package ``__init__`` files
resolve their public names lazily so that an analysis run never pays for them. The analyzer's classes
are msgspec Structs, not dataclasses: generating 25 dataclasses cost ~30 ms of every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_NEEDED = (
    "mixins.export", "mixins.capture_trace", "wrapt", "mixins.analysis.model.records", "rich", "torch", "dataclasses"
)


def _imported_after(code: str) -> tuple[set[str], str]:
    """The modules loaded once ``code`` ran in a fresh interpreter, and what it printed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)  # the .pth start-up hook stays off
    script = f"import sys\n{code}\nsys.stderr.write('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stderr.split()), done.stdout


@pytest.mark.parametrize(("code", "not_needed"), [
    ("from mixins.analysis.commands.attribute_match import attribute_replay\n"
     "from mixins.analysis.model.windows import load_capture\nfrom mixins.analysis.serialise import to_json", ()),
    # ``attribute --json`` to stdout writes no file and no CSV: ``tempfile`` (~2 ms, with ``random``) and ``csv``
    # are imported by the commands that write one, not by every run
    ("from mixins.cli import build_parser\nbuild_parser('attribute').parse_args(['attribute', '--json', 'replay.json', "
     "'capture.json'])", ("tempfile", "csv")),
], ids=["library", "cli"])
def test_attribution_path_imports_neither_exporter_nor_records(code: str, not_needed: tuple[str, ...]) -> None:
    loaded, _ = _imported_after(code)
    assert "mixins.analysis.commands.attribute_match" in loaded
    assert sorted(m for m in (*NOT_NEEDED, *not_needed) if m in loaded) == []


def test_public_names_still_resolve() -> None:
    loaded, _ = _imported_after(
        "import mixins, mixins.analysis\n"
        "assert mixins.CaptureTraceMixin.__name__ == 'CaptureTraceMixin'\n"
        "from mixins import export_cuda_graph_capture_trace, wait_for_exports, with_capture_trace\n"
        "from mixins.analysis import TraceError, TraceRecord, load_record\n"
        "assert callable(load_record) and 'CaptureTraceMixin' in dir(mixins)\n"
        "try:\n    mixins.nothing_here\nexcept AttributeError as exc:\n    assert 'nothing_here' in str(exc)\n"
        "else:\n    raise SystemExit('no AttributeError')"
    )
    assert {"mixins.export", "mixins.analysis.model.records"} <= loaded


def _cli_imports(*argv: str) -> tuple[set[str], str]:
    """The modules loaded by ``capture-trace ARGV`` (what the console script runs), and what it printed."""
    return _imported_after(f"from mixins.cli import main\nsys.argv[1:] = {list(argv)!r}\n"
                           "try:\n    main()\nexcept SystemExit:\n    pass")


def _commands_and_heavy(loaded: set[str]) -> list[str]:
    command = ("mixins.demo", "mixins.doctor", "mixins.metadata", "mixins.analysis")
    heavy = ("importlib.metadata", "numpy", "msgspec", "rich", "typing")
    return sorted(m for m in loaded if m.startswith(command) or m in heavy)


def test_version_and_help_import_no_command_module() -> None:
    """``--version`` is answered from ``mixins.cli`` and ``mixins.usage`` alone (not even argparse),
    ``--help`` with ``mixins.helptext`` too: no command's module, no ``importlib.metadata`` (the version is
    read from our dist-info), no numpy."""
    from importlib.metadata import version

    loaded, out = _cli_imports("--version")
    assert out == f"capture-trace {version('sglang-capture-trace')}\n"
    assert _commands_and_heavy(loaded) == [] and "argparse" not in loaded
    loaded, out = _cli_imports("--help")
    assert "summary " in out and "attribute" in out
    assert _commands_and_heavy(loaded) == []


def test_one_command_s_help_imports_no_other_command() -> None:
    loaded, out = _cli_imports("summary", "--help")
    assert "usage: capture-trace summary" in out
    assert "mixins.analysis.commands.summary" in loaded
    others = {f"mixins.analysis.commands.{name}" for name in ("attribute", "time", "report", "memory", "diff", "ls")}
    assert sorted(loaded & (others | {"mixins.demo", "mixins.doctor"})) == []
