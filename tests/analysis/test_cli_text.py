"""A CLI that reads well: help, widths, units, cut lists, directories, ``ls --long``."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from on_a_terminal import run_on_a_terminal

from mixins.cli import COMMANDS, build_parser
from tests.analysis.conftest import VLLM
from tests.analysis.pairs import DATA
from tests.readme_examples import assert_shows, examples
from tests.trace_files import load_trace, meta, op, span, write_trace

REPO = Path(__file__).resolve().parents[2]


def _cli(*argv: object, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a child process, stdout piped (not a terminal)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "mixins", *map(str, argv)], capture_output=True, text=True, env=env, timeout=300
    )


def _help(*argv: str) -> str:
    """``capture-trace ARGV --help`` as the console script prints it (the public parser, no internals)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        build_parser(argv[0] if argv else None).parse_args([*argv, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def _usage_tokens(text: str) -> list[str]:
    """The usage line's tokens (it may wrap), after ``usage: capture-trace NAME``."""
    usage = " ".join(text.split("\n\n")[0].split())
    return re.findall(r"\[[^\]]*\]|\S+", usage)[3:]


def _defaults(name: str, text: str) -> dict[str, object]:
    """Every option's default, from parsing a minimal command line built from the usage (required
    options and positionals get a placeholder): what a user who types nothing more gets."""
    tokens = [t for t in _usage_tokens(text) if not t.startswith("[")]
    args = [t if t.startswith("-") else "x" for t in tokens]
    return vars(build_parser(name).parse_args([name, *args]))


def _options(text: str) -> list[tuple[list[str], str]]:
    """(option strings, help text) of each entry of the ``options:`` section."""
    section = text.split("\noptions:\n", 1)[1].split("\n\n")[0]
    out: list[tuple[list[str], str]] = []
    for line in section.splitlines():
        if line.startswith("  -"):
            head, _, rest = line.strip().partition("  ")
            out.append(([p.split()[0] for p in head.split(", ")], rest.strip()))
        elif out:
            out[-1] = (out[-1][0], (out[-1][1] + " " + line.strip()).strip())
    return out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_has_description_example_exit_codes_and_option_help(name: str) -> None:
    text = _help(name)
    assert re.search(r"\n\n\S", text) and "examples:\n  capture-trace " + name in text
    assert re.search(r"exit codes:\n  0  .+\n  1  .+\n  2  .+\n  141  the reader of the output went away", text), text
    defaults = _defaults(name, text)
    required = {t for t in _usage_tokens(text) if t.startswith("-")}  # given a placeholder above
    flat = " ".join(text.split())
    options = _options(text)
    assert options, text
    for strings, help_text in options:
        assert help_text, f"{name} {strings} has no help"
        dest = max(strings, key=len).lstrip("-").replace("-", "_")
        default = defaults.get(dest)
        if isinstance(default, list):  # converted by its type from the text the help shows
            default = ",".join(map(str, default))
        if default not in (None, False) and dest != "help" and not required & set(strings):
            own_words = "(default " in help_text  # e.g. "(default 10,000,000)": said once, not twice
            assert own_words or f"(default: {default})" in flat, (name, dest)
            assert not (own_words and f"(default: {default})" in flat), (name, dest)


def test_help_wraps_to_columns() -> None:
    done = _cli("check", "--help", columns=60)
    assert done.returncode == 0
    prose = done.stdout.split("examples:")[0]
    assert max(len(line) for line in prose.splitlines()) <= 60, prose


@pytest.mark.parametrize(
    "argv",
    [
        ("check", "-j", "-1"),
        ("check", "-j", "many"),
        ("summary", "--top", "-2"),
        ("attribute", "-j", "-1", "replay.json.gz"),
        ("attribute", "--top", "-2", "replay.json.gz"),
    ],
)
def test_nonsense_numbers_are_refused_with_exit_2(argv: tuple[str, ...], tmp_path: Path) -> None:
    done = _cli(*argv, tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "must be an integer >= 0, got" in done.stderr.splitlines()[-1]


@pytest.fixture(scope="module")
def many_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace with eleven batch sizes, in a profiler dir: only graph_capture_profile/ inside."""
    profiler_dir = tmp_path_factory.mktemp("profiler_dir")
    (profiler_dir / "graph_capture_profile").mkdir()
    events = [span(f"capture::bs={bs}", 100 * bs, 50) for bs in range(1, 12)]
    events += [op("aten::mm", 100 * bs + k, 1, **{"Input Dims": [[bs, k]]}) for bs in range(1, 12) for k in range(40)]
    write_trace(profiler_dir / "graph_capture_profile" / "cuda_graph_capture-R-TP-0.json.gz",
                [*events, op("aten::zeros", 2000)], meta(runner="R", size=1))  # and one op outside the ranges
    return profiler_dir


def test_summary_takes_the_profiler_dir_and_its_trace_directory(many_segments: Path) -> None:
    """Before: summary refused a directory (``ls`` and ``check`` of a profiler dir: test_folders.py)."""
    for folder in (many_segments, many_segments / "graph_capture_profile"):
        done = _cli("summary", folder, "--json")
        assert done.returncode == 0, done.stderr
        names = [Path(t["path"]).name for t in json.loads(done.stdout)["traces"]]
        assert names == ["cuda_graph_capture-R-TP-0.json.gz"]


def test_piped_output_never_breaks_a_row_and_a_cut_list_says_how_many_more(many_segments: Path, tmp_path: Path) -> None:
    """Before: piped output was cut to 200 columns, so long rows broke mid-record; nor does a stale
    ``COLUMNS`` wrap it. A cut list says how many more (11 sizes and the outside); sizes in one unit system."""
    deep = tmp_path / ("a-rather-long-directory-name-" * 8) / "graph_capture_profile"
    deep.mkdir(parents=True)
    trace = deep / "cuda_graph_capture-DecodeCudaGraphRunner-with-a-long-name-TP-0.json.gz"
    shutil.copy(many_segments / "graph_capture_profile" / "cuda_graph_capture-R-TP-0.json.gz", trace)
    summary = _cli("summary", trace, "--top", "1")
    assert summary.returncode == 0
    assert any(line.startswith(str(trace)) and "R TP 0" in line for line in summary.stdout.splitlines())
    for columns in (None, 40):
        listing = _cli("ls", deep, columns=columns)
        (row,) = [line for line in listing.stdout.splitlines() if trace.name in line]  # the whole record, one line
        assert listing.returncode == 0 and "12: bs=1, bs=2, bs=3, bs=4, bs=5, bs=6, bs=7, bs=8, 4 more" in row
        assert re.search(r"\d KiB", row) and not re.search(r"\d (KB|MB|GB)\b", listing.stdout)


def test_terminal_output_respects_columns(many_segments: Path) -> None:
    """On a real pseudo-terminal the table fits COLUMNS."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), COLUMNS="70")
    done = run_on_a_terminal([sys.executable, "-m", "mixins", "ls", many_segments], env)  # size unset: COLUMNS only
    assert done.returncode == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.terminal.decode())  # drop colour codes
    lines = [line for line in text.splitlines() if line.strip()]
    assert any("KiB" in line for line in lines), lines
    assert max(len(line) for line in lines) <= 70, lines


def test_ls_long_shows_the_recorded_metadata(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rc, text, _ = run_cli("ls", "--long", cpu_traces["r1"])
    assert rc == 0
    lines = text.splitlines()
    assert lines[0] == str(cpu_traces["r1"])
    fields = dict(re.fullmatch(r"  (\w+) +(.*)", line).groups() for line in lines[1:])  # type: ignore[union-attr,misc]
    assert fields["runner"] == "DecodeCudaGraphRunner (sglang.srt.model_executor.runner.DecodeCudaGraphRunner)"
    assert fields["ranks"].startswith("TP 1 of ?, PP 0 of 1")
    assert fields["capture"] == "#1, batch sizes 1, 4"
    assert fields["versions"] == "sglang not installed, torch 2.13.0, sglang-capture-trace 0.1.0"
    assert fields["host"] == "test, pid 1, device cpu" and fields["time"] == "2026-01-01T00:00:00Z"
    rc, out, _ = run_cli("ls", "--json", cpu_traces["r1"])
    assert json.loads(out)["traces"][0]["metadata"]["hostname"] == "test"
    shutil.copy(VLLM, tmp_path / VLLM.name)
    rc, text, _ = run_cli("ls", "--long", tmp_path)
    assert rc == 0 and "metadata  none in the trace (identity from distributedInfo: ? TP 0)" in text


def test_no_pp_none_for_traces_without_ranks(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = load_trace(cpu_traces["nometa"])
    (tmp_path / "a.json").write_text(json.dumps({k: v for k, v in doc.items() if k != "capture_trace"}))
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 0 and "None" not in text


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    done = _cli("--version")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"capture-trace {version('sglang-capture-trace')}\n"


def test_the_command_list_is_the_parsers() -> None:
    """``mixins.cli.COMMANDS`` (what a single-command parser is built for) cannot drift from the parser."""
    listed = re.findall(r"^    (\S+)", _help().split("positional arguments:")[1].split("options:")[0], re.M)
    assert listed == list(COMMANDS)
    for name in COMMANDS:
        assert _usage_tokens(_help(name))[0].startswith("["), name  # its own usage: capture-trace NAME [...]
        with pytest.raises(SystemExit):
            build_parser(name).parse_args([next(n for n in COMMANDS if n != name)])  # only NAME is known


def test_one_command_imports_only_its_own_modules(tmp_path: Path) -> None:
    """``attribute --json`` loads neither the other commands' modules nor rich nor package metadata;
    the table output does load rich."""
    from analysis_child import child_env, command
    from pairs import VLLM_CAPTURE, VLLM_REPLAY

    def modules(*argv: object) -> set[str]:
        env = child_env(PYTHONPATH=str(REPO), SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
        done = subprocess.run(
            command("modules_after_cli", *argv), capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["rc"] == 0
        return set(got["modules"])

    loaded = modules("attribute", "--json", VLLM_REPLAY, VLLM_CAPTURE)
    assert "mixins.analysis.commands.attribute_match" in loaded
    others = {"mixins.demo", "mixins.doctor", "mixins.analysis.commands.compare", "mixins.analysis.commands.time",
              "mixins.analysis.model.records", "mixins.output_dir", "importlib.metadata", "torch", "wrapt",
              "multiprocessing"}  # one capture, a small replay: no worker process, so no pool
    assert loaded & others == set()
    assert not any(m == "rich" or m.startswith("rich.") for m in loaded)
    assert "rich.table" in modules("attribute", VLLM_REPLAY, VLLM_CAPTURE)


@pytest.mark.parametrize(("argv", "redirected", "shown"), [
    pytest.param(*example, id=" ".join(example[0][:2])) for example in examples() if "demo-out" not in str(example[0])
])
def test_the_readme_examples_on_tests_data_are_the_real_output(argv: list[str], redirected: bool,
                                                               shown: list[str]) -> None:
    """Each README example on ``tests/data``'s traces, re-run there (the demo's: ``tests/core/test_demo.py``)."""
    assert_shows(argv, redirected, shown, DATA)
