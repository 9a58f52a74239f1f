"""The start-up hook and the analyzer as pip really installs them (fixtures in conftest.py): the ``.pth``
and its bootstrap in site-packages, switches read in a fresh interpreter, a real foreign ``mixins``,
an editable install, and no torch anywhere (docs/DESIGN.md §4)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from installed_venvs import FOREIGN_MARK, REPO, Venv, clean_env

ENABLE = "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
HOOK = "SGLANG_CAPTURE_TRACE_STARTUP_HOOK"
PLUGINS = "SGLANG_PLUGINS"
TRACE = REPO / "tests" / "data" / "h100_qwen1.5-0.5b_inference.json.gz"
# What the .pth line imports when the switch is set: the bootstrap, then the switches it reads (stdlib only)
STARTUP_MODULES = ("_sglang_capture_trace_bootstrap", "_sglang_capture_trace_switches")

def probe(venv: Venv, cwd: Path, **env: str) -> tuple[dict, str]:
    """What a fresh interpreter holds right after start-up (the .pth has run), and whether sglang is patched."""
    done = venv.run("probe", cwd, **env)
    assert done.returncode == 0, done.stderr
    assert "Error processing line" not in done.stderr, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.fixture(params=["wheel", pytest.param("editable", marks=pytest.mark.exhaustive)])  # CI runs both
def venv(request: pytest.FixtureRequest) -> Venv:
    return request.getfixturevalue(f"{request.param}_venv")


def test_pth_and_bootstrap_are_installed_beside_each_other(venv: Venv) -> None:
    """Editable installs get the hook too (hatchling copies the files into site-packages)."""
    site = venv.site_packages
    assert (site / "sglang_capture_trace.pth").read_text() == (REPO / "mixins" / "sglang_capture_trace.pth").read_text()
    for module in STARTUP_MODULES:
        assert (site / f"{module}.py").read_text() == (REPO / f"{module}.py").read_text()


@pytest.mark.parametrize("env", [{ENABLE: "1"}, {ENABLE: "1", PLUGINS: "other, capture_trace"}],
                         ids=["on", "plugins-naming-us"])
def test_switch_on_patches_sglang_at_start_up_without_importing_it(
    venv: Venv, tmp_path: Path, env: dict[str, str]
) -> None:
    result, stderr = probe(venv, tmp_path, **env)
    assert result["installed"] is True, stderr
    assert "wrapt" in result["modules"]
    assert not {"torch", "sglang"} & set(result["modules"])


@pytest.mark.parametrize(
    "env",
    [
        {ENABLE: "0"},
        {ENABLE: "1", HOOK: "0"},
        {ENABLE: "1", PLUGINS: "other"},
    ],
    ids=["switch-off", "hook-off", "plugins-without-us"],
)
def test_hook_off_imports_nothing(wheel_venv: Venv, tmp_path: Path, env: dict[str, str]) -> None:
    """The modules of an interpreter without any of our variables plus the bootstrap and the switches it
    reads: no mixins, no wrapt, no importlib.metadata."""
    baseline, _ = probe(wheel_venv, tmp_path)  # no variable: the .pth line does not import the bootstrap
    result, stderr = probe(wheel_venv, tmp_path, **env)
    # the switch is set, so the bootstrap is imported to decide (the import system's zipimport with it)
    assert set(result["modules"]) - set(baseline["modules"]) <= {*STARTUP_MODULES, "zipimport"}
    assert set(STARTUP_MODULES) <= set(result["modules"])
    assert set(baseline["modules"]) <= set(result["modules"])
    assert "mixins" not in baseline["modules"] and "wrapt" not in baseline["modules"]
    assert stderr == ""


@pytest.mark.parametrize("env", [{}, {ENABLE: "1", HOOK: "0"}], ids=["unset", "hook-off"])
def test_bootstrap_itself_imports_nothing_when_off(wheel_venv: Venv, tmp_path: Path, env: dict[str, str]) -> None:
    """``-X importtime``: with the switch unset the .pth line does not even import the bootstrap (an
    environment lookup, as in the first release); set but off, the bootstrap's one child import is the
    switches module, which has none."""
    done = wheel_venv.run("nothing", tmp_path, "-X", "importtime", **env)
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
    timings = {name.strip(): (int(own.split(":")[1]), int(total)) for own, total, name in rows[1:]}
    assert not {"mixins", "wrapt", "importlib.metadata", "logging"} & set(timings)
    if ENABLE not in env:
        assert not set(STARTUP_MODULES) & set(timings)
        return
    assert _imported_under(rows, STARTUP_MODULES[0]) == [STARTUP_MODULES[1]]
    assert _imported_under(rows, STARTUP_MODULES[1]) == []


def _imported_under(rows: list[list[str]], module: str) -> list[str]:
    """The modules ``module``'s import imported (``-X importtime`` lists them just before it, indented deeper)."""
    names = [row[2] for row in rows]
    at = next(i for i, name in enumerate(names) if name.strip() == module)
    depth = len(names[at]) - len(names[at].lstrip())
    under = []
    for name in reversed(names[:at]):
        if len(name) - len(name.lstrip()) <= depth:
            break
        under.append(name.strip())
    return under


@pytest.mark.parametrize(
    ("env", "variable", "installed"),
    [({ENABLE: "bogus"}, ENABLE, False), ({ENABLE: "1", HOOK: "maybe"}, HOOK, True)],
    ids=["bad-switch", "bad-hook-switch"],
)
def test_invalid_switch_value_warns_once(
    wheel_venv: Venv, tmp_path: Path, env: dict[str, str], variable: str, installed: bool
) -> None:
    result, stderr = probe(wheel_venv, tmp_path, **env)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and variable in lines[0] and repr(env[variable]) in lines[0], stderr
    assert result["installed"] is installed
    if not installed:
        assert "mixins" not in result["modules"] and "wrapt" not in result["modules"]


def _assert_foreign_left_alone(result: dict, stderr: str, origin: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr  # one warning, no "Error processing line", no traceback
    assert "start-up hook does nothing" in lines[0] and origin in lines[0]
    assert FOREIGN_MARK not in stderr  # the foreign package was never imported
    assert "mixins" not in result["modules"] and "wrapt" not in result["modules"]
    assert result["installed"] is False


def test_foreign_mixins_installed_over_ours_is_left_alone(foreign_venv: Venv, tmp_path: Path) -> None:
    """Another distribution's ``mixins/__init__.py`` replaced ours on disk: the recorded hash differs."""
    init = foreign_venv.site_packages / "mixins" / "__init__.py"
    assert FOREIGN_MARK in init.read_text()  # the clash really happened
    result, stderr = probe(foreign_venv, tmp_path, **{ENABLE: "1"})
    _assert_foreign_left_alone(result, stderr, str(init))
    off, off_stderr = probe(foreign_venv, tmp_path)
    assert off_stderr == "" and "mixins" not in off["modules"]


def test_foreign_mixins_first_on_the_path_is_left_alone(wheel_venv: Venv, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "mixins").mkdir(parents=True)
    init = shadow / "mixins" / "__init__.py"
    init.write_text(f'import sys\nsys.stderr.write("{FOREIGN_MARK}\\n")\n')
    result, stderr = probe(wheel_venv, tmp_path, **{ENABLE: "1", "PYTHONPATH": str(shadow)})
    _assert_foreign_left_alone(result, stderr, str(init.resolve()))


# -- the analyzer without torch ------------------------------------------------------------------------

def test_analyzer_runs_without_torch_and_without_wrapt(wheel_venv: Venv, tmp_path: Path) -> None:
    no_torch = wheel_venv.run("torch_missing", tmp_path)
    assert no_torch.stdout.strip() == "True"
    done = wheel_venv.run("cli", tmp_path, args=("summary", "--json", str(TRACE)))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "loaded": []}


def test_demo_without_torch_says_how_to_get_it(wheel_venv: Venv, tmp_path: Path) -> None:
    script = wheel_venv.root / "bin" / "capture-trace"
    done = subprocess.run([str(script), "demo", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120, env=clean_env(), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "capture-trace: error: the demo needs torch, which is not installed: pip install torch (the extra [torch])"
    ]
    assert not (tmp_path / "out" / "graph_capture_profile").exists()


def test_wheel_ships_type_hints_and_torch_only_as_an_extra(wheel_venv: Venv) -> None:
    site = wheel_venv.site_packages
    assert (site / "mixins" / "py.typed").is_file()
    (dist_info,) = site.glob("sglang_capture_trace-*.dist-info")
    requires = [line for line in (dist_info / "METADATA").read_text().splitlines() if line.startswith("Requires-Dist:")]
    torch = [line for line in requires if line.split()[1].startswith("torch")]
    extras = sorted(line.split("extra ==")[-1].strip(" '\"") for line in torch if "extra ==" in line)
    assert extras == ["test", "torch"], torch  # never an unconditional torch requirement


# -- doctor in broken environments: exit 1 with a one-line cause, never a traceback ------------------------

BROKEN_CAUSE = "RuntimeError: operator torchvision::nms does not exist"


def broken_sglang(directory: Path) -> Path:
    """A real package ``sglang`` 0.5.23 (with its plugin loader module) whose import fails as a torchvision
    built for another torch makes it fail: ``import sglang`` → ``import torchvision`` → RuntimeError."""
    (directory / "sglang" / "srt" / "plugins").mkdir(parents=True)
    (directory / "sglang" / "__init__.py").write_text("import torchvision  # noqa: F401\n")
    (directory / "sglang" / "srt" / "__init__.py").write_text("")
    (directory / "sglang" / "srt" / "plugins" / "__init__.py").write_text("def load_plugins():\n    pass\n")
    (directory / "sglang-0.5.23.dist-info").mkdir()
    (directory / "sglang-0.5.23.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n"
    )
    (directory / "torchvision").mkdir()
    (directory / "torchvision" / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n'
    )
    return directory


def doctor(venv: Venv, cwd: Path, **env: str) -> tuple[int, str, list[str]]:
    """The installed console script ``capture-trace doctor``; its exit code, all output, its problem lines."""
    done = subprocess.run([str(venv.root / "bin" / "capture-trace"), "doctor"], capture_output=True, text=True,
                          timeout=120, env=clean_env(**env), cwd=cwd)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert "no problem found" not in output, output
    return done.returncode, output, [line for line in done.stdout.splitlines() if line.startswith("problem: ")]


def test_doctor_where_import_sglang_raises(wheel_venv: Venv, tmp_path: Path) -> None:
    """The issue's environment: ``find_spec("sglang.srt.plugins")`` used to die in ``import sglang``."""
    broken = broken_sglang(tmp_path / "site")
    rc, output, problems = doctor(wheel_venv, tmp_path, PYTHONPATH=str(broken), **{ENABLE: "1"})
    assert rc == 1
    assert problems[0] == f"problem: import sglang fails here, so no sglang process can start: {BROKEN_CAUSE}"
    assert f"  import sglang: fails: {BROKEN_CAUSE}\n" in output
    assert "sglang 0.5.23 (run in CI)" in output
    assert "sglang's plugin loader: present (sglang >= 0.5.13)" in output  # found without importing sglang
    assert "runner modules not imported: import sglang fails (above)" in output
    assert not any("check failed" in line for line in problems), problems  # every other probe still ran


def test_doctor_without_sglang(wheel_venv: Venv, tmp_path: Path) -> None:
    """No sglang at all (the analyzer-only venv): a problem, not 'a capture writes a trace'."""
    rc, output, problems = doctor(wheel_venv, tmp_path, **{ENABLE: "1"})
    assert rc == 1
    assert problems[0] == (
        f"problem: sglang is not installed in this environment ({wheel_venv.root}/bin/python): "
        "install sglang-capture-trace where sglang runs"
    ), problems
    assert "sglang's plugin loader: absent" in output


@pytest.mark.parametrize("value", [" , ", ",", "other"])
def test_doctor_reads_plugins_as_the_bootstrap_does(wheel_venv: Venv, tmp_path: Path, value: str) -> None:
    """``SGLANG_PLUGINS=" , "`` allows no plugin: the bootstrap stands down and doctor says so (it used to
    print "(unset: every plugin loads)")."""
    result, _ = probe(wheel_venv, tmp_path, **{ENABLE: "1", PLUGINS: value})
    assert result["installed"] is False  # the bootstrap in this venv stood down
    broken = broken_sglang(tmp_path / "site")
    rc, output, problems = doctor(wheel_venv, tmp_path, PYTHONPATH=str(broken), **{ENABLE: "1", PLUGINS: value})
    expected = "other" if value == "other" else None
    allow = f"allow-list {expected}" if expected else "an allow-list naming no plugin (sglang loads none)"
    assert f"  {PLUGINS}={value!r}: {allow}: excludes capture_trace\n" in output
    assert "every plugin loads" not in output
    assert "  live routes: none\n" in output
    assert rc == 1 and "problem: no activation route is live: sglang's processes will not be patched" in problems
