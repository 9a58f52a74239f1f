"""``capture-trace doctor`` on a FAKE sglang (fresh interpreters, as a user runs it) and, inside the
sglang venvs, on the real one."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from fake_sglang import DECODE, EAGLE, FAKES, REPO, XPU, clean_env, fake_with, run_python

HOOK = "_post_process_after_profile"


def doctor(fake: Path, *args: str, **env: str) -> tuple[int, str]:
    proc = run_python(fake, "-m", "mixins.doctor", *args, **env)
    assert proc.stderr == ""
    return proc.returncode, proc.stdout


ON = {"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "1"}
#: (arguments, environment, exit code, lines the report holds) on the era-C fake, some of its modules replaced
#: by files of ``fakes/variants`` (the last item, where there is one).
REPORTS: dict[str, tuple[Any, ...]] = {
    "every row and the routes": ((), {**ON, "SGLANG_PLUGINS": "other"}, 1, [
        f"{DECODE}.{HOOK}: applied", f"{XPU}.{HOOK}: applied",
        f"{EAGLE}.{HOOK}: skipped (EAGLEDraftCudaGraphRunner lacks ['capture'])",
        "NPUGraphRunner._post_process_after_profile: skipped (no module ",
        "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE=1: on",
        "SGLANG_PLUGINS='other': allow-list other: excludes capture_trace",
        "live routes: none",  # start-up hook off, allow-list without us
        "patch installed for this report only", "problem: no activation route is live"]),
    # " , " is set and non-empty: an allow-list naming no plugin, so neither route is live
    "a blank allow-list as sglang and the bootstrap take it": (
        (), {**ON, "SGLANG_PLUGINS": " , ", "SGLANG_CAPTURE_TRACE_STARTUP_HOOK": "1"}, 1, [
            "SGLANG_PLUGINS=' , ': an allow-list naming no plugin (sglang loads none): excludes capture_trace",
            "  live routes: none\n", "problem: no activation route is live"]),
    "the switch when it is off": ((), {"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "no"}, 1, [
        "problem: SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE is 'no': set it to 1"]),
    "rows waiting without the import": (("--no-import",), ON, None, [
        f"{DECODE}.{HOOK}: waiting for import", "sglang's plugin loader: absent", "live routes: "]),
    "deferred rows and modules that fail to import": ((), ON, None, [
        f"{DECODE}.{HOOK}: deferred to native (the hook exports natively in a way we cannot take over)",
        f"{XPU}.{HOOK}: cannot tell (", "capture_trace_no_such_dependency"], {
            DECODE.rsplit(".", 1)[0]: "decode_via_module_attribute.py",
            XPU.rsplit(".", 1)[0]: "needs_missing_dependency.py"}),
}


@pytest.mark.parametrize("case", list(REPORTS))
def test_doctor_reports(case: str, tmp_path: Path) -> None:
    args, env, expected_rc, lines, *variants = REPORTS[case]
    rc, out = doctor(fake_with(tmp_path, "era_c", *variants) if variants else FAKES / "era_c", *args, **env)
    assert [line for line in lines if line not in out] == [], out
    assert expected_rc is None or rc == expected_rc


@pytest.mark.parametrize("columns", [60, 80, 100, 120])
@pytest.mark.parametrize("command", [["-m", "mixins", "doctor"], ["-m", "mixins.doctor"]], ids=["cli", "module"])
def test_doctor_help_is_plain_text_with_whole_option_names(command: list[str], columns: int) -> None:
    done = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=str(REPO), COLUMNS=str(columns)))
    assert done.returncode == 0 and done.stderr == ""
    assert "``" not in done.stdout  # no reST markup
    words = done.stdout.split()
    assert done.stdout.count("--no-import") >= 3  # usage, the description and the option
    assert not [w for w in words if w.endswith("-") and w != "-"], done.stdout  # nothing broken at a hyphen
    assert all(len(line) <= columns for line in done.stdout.splitlines()), done.stdout
    assert "SGLANG_PLUGINS" in done.stdout and "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="sglang is not installed here")
def test_doctor_on_the_real_sglang(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed package: entry point and .pth found, both routes live, rows applied for this sglang."""
    from mixins import sglang_patch
    from mixins.doctor import main
    from mixins.sglang_targets import TARGETS

    for key in [k for k in os.environ if k.startswith("SGLANG_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "plugin entry point 'capture_trace' in sglang.srt.plugins: mixins.sglang_patch:register" in out
    assert "live routes: " in out and ".pth" in out
    assert ": applied" in out and "cannot tell" not in out
    # the CPU graph runner (every CI release) is profiled by us: sglang never profiles its capture
    cpu = "sglang.srt.model_executor.cpu_graph_runner.CPUGraphRunner.capture"
    assert f"{cpu}: applied (profiled by us: sglang does not profile this capture)" in out
    # a row whose module needs hardware this machine lacks says so (not "cannot tell")
    vit_npu = next(t for t in TARGETS if t.cls == "ViTNpuGraphRunner")
    release = metadata.version("sglang").split(".post")[0]
    if importlib.util.find_spec("torch_npu") is None and release in vit_npu.read_in:
        assert (f"{vit_npu.qualname}: skipped (needs torch_npu (an Ascend NPU build of torch): "
                "ModuleNotFoundError: No module named 'torch_npu')") in out
    assert not sglang_patch.PATCH.installed  # installed for the report only, and removed again


@pytest.mark.parametrize("where", ["world-writable", "under a file"])
def test_doctor_says_when_no_trace_can_be_written(tmp_path: Path, where: str) -> None:
    """The export refuses a directory anyone may write (no sticky bit) and cannot write under a file:
    doctor said "no problem found". It now runs the export's own checks, creating nothing."""
    if where == "world-writable":
        (tmp_path / "graph_capture_profile").mkdir()
        os.chmod(tmp_path / "graph_capture_profile", 0o777)
        profiler_dir, reason = tmp_path, "it is writable by every user without the sticky bit"
    else:
        (tmp_path / "afile").write_text("")
        profiler_dir, reason = tmp_path / "afile", f"{tmp_path / 'afile'} is not a directory"
    rc, out = doctor(FAKES / "era_c", SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1",
                     SGLANG_TORCH_PROFILER_DIR=str(profiler_dir))
    assert rc == 1 and "problem: no trace can be written: " in out and reason in out, out
    assert "no problem found" not in out


def test_doctor_shows_undecodable_environment_values_escaped() -> None:
    """A switch value with a byte that is not UTF-8 crashed doctor's print (a strict UTF-8 stdout)."""
    done = subprocess.run(
        [sys.executable, "-m", "mixins.doctor", "--no-import"], capture_output=True, timeout=120,
        env={**clean_env(PYTHONPATH=str(REPO), PYTHONIOENCODING="utf-8"),
             "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": os.fsdecode(b"on\xff"),
             "SGLANG_TORCH_PROFILER_DIR": os.fsdecode(b"/tmp/\xff\ndir")},
    )
    assert done.returncode == 1 and b"Traceback" not in done.stderr, done.stderr
    assert b"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE=on\\udcff: off" in done.stdout
    assert b"traces go to /tmp/\\udcff\\ndir/graph_capture_profile" in done.stdout
