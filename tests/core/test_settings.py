from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from core_helpers import warnings_of

import _sglang_capture_trace_switches as switches
from mixins import settings


@pytest.mark.parametrize(("raw", "expected"), [
    *((raw, True) for raw in ("1", "true", "TRUE", "True", "yes", "Y", "y")),
    *((raw, False) for raw in ("0", "false", "False", "no", "N", "n", None)),  # None: unset, off
    # not sglang's EnvBool: one WARNING naming the variable (however often read), and off
    *((raw, None) for raw in ("", " 1", "1 ", "on", "off", "enable", "2", "tru", "yes please")),
])
def test_switch_reads_sglangs_envbool_values_at_call_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str | None, expected: bool | None
) -> None:
    switches._warned.clear()
    if raw is None:
        monkeypatch.delenv(settings.ENABLE, raising=False)
    else:
        monkeypatch.setenv(settings.ENABLE, raw)
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert [settings.trace_enabled(), settings.trace_enabled()] == [bool(expected)] * 2
    warnings = warnings_of(caplog)
    assert len(warnings) == int(expected is None)
    assert expected is not None or (settings.ENABLE in warnings[0] and repr(raw) in warnings[0]
                                    and "true/1/yes/y/false/0/no/n" in warnings[0])


def test_profiler_dir_defaults_to_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.PROFILER_DIR, raising=False)
    assert settings.profiler_dir() == "/tmp"
    monkeypatch.setenv(settings.PROFILER_DIR, "")
    assert settings.profiler_dir() == "/tmp"
    monkeypatch.setenv(settings.PROFILER_DIR, "/data/prof")
    assert settings.profiler_dir() == "/data/prof"


_GZIP = (settings.GZIP_LEVEL, settings.gzip_level, 6, "expected an integer from 0 to 9; using 6")
_EXIT = (settings.EXIT_TIMEOUT, settings.exit_timeout, 300.0,
         "expected a number of seconds from 0 to 86400; using 300.0")


@pytest.mark.parametrize(("setting", "raw", "expected"), [
    *((_GZIP, raw, value) for raw, value in [
        (None, 6), ("1", 1), ("9", 9), ("0", 0), ("10", 6), ("x", 6), ("-1", 6), (" 5", 6), ("0_5", 6),
        ("\u0665", 6), ("1" * 5000, 6),
    ]),
    *((_EXIT, raw, value) for raw, value in [
        (None, 300.0), ("0", 0.0), ("2.5", 2.5), (".5", 0.5), ("1e3", 1000.0), ("86400", 86400.0),
        ("inf", 300.0), ("Infinity", 300.0), ("1e400", 300.0), ("1e12", 300.0), ("86400.5", 300.0), ("nan", 300.0),
        ("-1", 300.0), ("", 300.0), (" 5", 300.0), ("1_0", 300.0), ("\u0665", 300.0), ("9" * 5000, 300.0),
    ]),
], ids=lambda v: v[0] if isinstance(v, tuple) else None)
def test_numeric_settings_warn_once_and_use_the_default(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, setting: tuple[Any, ...], raw: str | None,
    expected: float,
) -> None:
    """Read twice (unset when ``raw`` is None): a bad value warns once, not at every read. The exit timeout is
    finite and at most a day: ``inf``/``1e400``/``1e12`` made threading._shutdown raise OverflowError at exit."""
    name, read, default, message = setting
    switches._warned.clear()
    if raw is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, raw)
    with caplog.at_level(logging.WARNING, logger="mixins"):
        values = [read(), read()]
    warnings = warnings_of(caplog)
    assert values == [expected, expected]
    valid = raw is None or expected != default
    assert len(warnings) == (0 if valid else 1)
    assert valid or f"for {name}: {message}" in warnings[0]


def test_strict_and_background_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.STRICT, raising=False)
    monkeypatch.delenv(settings.BACKGROUND, raising=False)
    assert settings.strict() is False and settings.background() is True
    monkeypatch.setenv(settings.STRICT, "yes")
    monkeypatch.setenv(settings.BACKGROUND, "0")
    assert settings.strict() is True and settings.background() is False


def test_package_and_start_up_hook_share_one_switch_definition() -> None:
    """The .pth bootstrap and the package decide "enabled" with the same function and grammar."""
    assert settings.trace_enabled is switches.trace_enabled
    assert settings.parse_env_bool is switches.parse_env_bool
    assert settings.ENABLE == switches.ENABLE == "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
    import _sglang_capture_trace_bootstrap as bootstrap

    assert bootstrap.startup_hook_wanted is switches.startup_hook_wanted


ON = {settings.ENABLE: "1"}


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({settings.ENABLE: "0"}, False),
        (ON, True),
        ({settings.ENABLE: "YES"}, True),
        ({**ON, settings.STARTUP_HOOK: "0"}, False),
        ({**ON, settings.STARTUP_HOOK: "false"}, False),
        ({**ON, settings.STARTUP_HOOK: "1"}, True),
        ({**ON, settings.PLUGINS: "other"}, False),
        ({**ON, settings.PLUGINS: "other, capture_trace"}, True),
        ({**ON, settings.PLUGINS: ""}, True),  # unset or empty: no allow-list
        ({**ON, settings.PLUGINS: " , "}, False),  # sglang 0.5.23 load_plugins: allows no plugin
        ({settings.PLUGINS: "capture_trace"}, False),
    ],
)
def test_startup_hook_wanted(environ: dict[str, str], wanted: bool) -> None:
    assert settings.startup_hook_wanted(environ) is wanted


@pytest.mark.parametrize(
    ("value", "allow_list"),
    [
        (None, None), ("", None), (" , ", frozenset()), (",", frozenset()),
        ("a, capture_trace ,", {"a", "capture_trace"}),
    ],
)
def test_plugin_allow_list_as_sglang_reads_it(value: str | None, allow_list: set[str] | None) -> None:
    """One reading of SGLANG_PLUGINS for the bootstrap and doctor (sglang 0.5.23's load_plugins)."""
    environ = {} if value is None else {settings.PLUGINS: value}
    assert settings.plugin_allow_list(environ) == allow_list
    assert settings.plugin_allowed(environ) is (allow_list is None or "capture_trace" in allow_list)


def test_invalid_startup_switch_warns_once_and_keeps_the_hook_on(caplog: pytest.LogCaptureFixture) -> None:
    switches._warned.clear()
    environ = {**ON, settings.STARTUP_HOOK: "off"}
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert settings.startup_hook_wanted(environ) is True
        assert settings.startup_hook_wanted(environ) is True
    messages = warnings_of(caplog)
    assert len(messages) == 1 and settings.STARTUP_HOOK in messages[0] and "'off'" in messages[0]


# -- names a typo away from ours ------------------------------------------------------------------------

PTH = Path(__file__).resolve().parents[2] / "mixins" / "sglang_capture_trace.pth"


def _interpreter_start(**env: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running our .pth line as site.py does (``exec`` of an ``import`` line)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    return subprocess.run([sys.executable, "-c", f"exec({PTH.read_text()!r})"], capture_output=True, text=True,
                          env={**clean, **env}, timeout=120)


@pytest.mark.parametrize(("env", "stderr"), [
    *(({typo: "1"}, f"sglang-capture-trace: {typo} is set; did you mean {ours}?\n") for typo, ours in [
        ("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACES", settings.ENABLE),
        ("SGLANG_TORCH_PROFILE_DIR", settings.PROFILER_DIR),
        ("SGLANG_CAPTURE_TRACE_GZIP_LEVL", settings.GZIP_LEVEL),
    ]),
    ({"SGLANG_PORT": "30000", "SGLANG_USE_MODELSCOPE": "1", "SGLANG_CAPTURE_TRACE_STRICT": "0",
      "SGLANG_TORCH_PROFILER_DIR": "/tmp", "SGLANG_LOGGING_CONFIG_PATH": "x"}, ""),  # others' names, and ours
])
def test_start_up_hook_warns_once_about_a_name_a_typo_away(env: dict[str, str], stderr: str) -> None:
    """Before, a misspelt switch was silent (the .pth ran nothing without the exact name)."""
    done = _interpreter_start(**env)
    assert done.returncode == 0 and done.stderr == stderr, done.stderr


def test_doctor_names_the_typo() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    done = subprocess.run([sys.executable, "-m", "mixins.doctor", "--no-import"], capture_output=True, text=True,
                          env={**clean, "SGLANG_TORCH_PROFILE_DIR": "/x", "PYTHONPATH": str(PTH.parents[1])},
                          timeout=120)
    assert (f"  warning: SGLANG_TORCH_PROFILE_DIR is set; did you mean {settings.PROFILER_DIR}?"
            in done.stdout.splitlines()), done.stdout


def _levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, row[0] = row[0], i
        for j in range(1, len(b) + 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return row[len(b)]


def test_banded_distance_agrees_with_the_full_one() -> None:
    import random

    from _sglang_capture_trace_switches import within_distance

    rng = random.Random(7)
    for _ in range(5000):
        a, b = ("".join(rng.choice("ab_") for _ in range(rng.randint(0, 8))) for _ in range(2))
        for limit in (0, 1, 2):
            assert within_distance(a, b, limit) == (_levenshtein(a, b) <= limit), (a, b, limit)


def test_every_near_miss_of_ours_is_found() -> None:
    """The trigram filter never hides a name within two edits (random insertions, deletions, swaps)."""
    import random

    rng = random.Random(3)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    for _ in range(2000):
        ours = rng.choice(settings.OUR_VARIABLES)
        name = ours
        for _ in range(2):
            i = rng.randrange(len(name) + 1)
            name = rng.choice([name[:i] + rng.choice(letters) + name[i:], name[:i] + name[i + 1:],
                               name[:i] + rng.choice(letters) + name[i + 1:]])
        if name.startswith("SGLANG_") and name not in settings.OUR_VARIABLES:
            assert settings.misspelt_variables({name: ""}), name
