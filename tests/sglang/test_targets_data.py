"""The version facts in ``mixins.sglang_targets`` are data, and held to what CI runs.

- every release a row lists in ``verified_in`` has a CI venv (``.ci/Makefile``'s version list, with its
  deps list), and ``verified_in`` is a subset of ``read_in``;
- inside an sglang venv: the rows that really apply to the installed sglang (real classes, real
  install) are exactly the rows that list it (``verified_in`` for CI versions, ``read_in`` otherwise);
- the README's compatibility table is what ``scripts/compat_table.py`` generates from the rows.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mixins.sglang_targets import CI_RELEASES, RELEASES, TARGETS, span

REPO = Path(__file__).resolve().parents[2]
CI_STEPS = REPO / ".ci" / "Makefile"


def ci_versions() -> tuple[str, ...]:
    """The sglang versions CI (``.ci/run``, its steps in ``.ci/Makefile``) builds a venv for and runs
    tests/sglang in."""
    match = re.search(r"^SGLANG_VERSIONS := ([0-9. ]+)$", CI_STEPS.read_text(), re.MULTILINE)
    assert match, f"{CI_STEPS}: no 'SGLANG_VERSIONS := X Y Z' line"
    return tuple(match.group(1).split())


def test_every_verified_version_runs_in_ci() -> None:
    ci = set(ci_versions())
    assert set(CI_RELEASES) == ci, f"sglang_targets.CI_RELEASES {CI_RELEASES}, .ci/Makefile runs {sorted(ci)}"
    for target in TARGETS:
        assert set(target.verified_in) <= ci, f"{target.qualname}: verified_in {target.verified_in}, CI runs {ci}"
        assert set(target.verified_in) <= set(target.read_in), target.qualname


def test_every_ci_version_has_a_deps_list_and_is_a_known_release() -> None:
    for version in ci_versions():
        assert (REPO / "tests" / "sglang-envs" / f"sglang-{version}-cpu-deps.txt").is_file(), version
        assert version in RELEASES, f"{version}: add it to sglang_targets.RELEASES"


def test_versions_are_known_releases_in_order() -> None:
    for target in TARGETS:
        for field in (target.read_in, target.verified_in):
            assert all(v in RELEASES for v in field), target.qualname
            assert list(field) == sorted(field, key=RELEASES.index), target.qualname
    assert list(RELEASES) == sorted(RELEASES, key=lambda version: [int(part) for part in version.split(".")])
    assert span("0.5.6", "0.5.8") == ("0.5.6", "0.5.7", "0.5.8")
    with pytest.raises(ValueError, match="comes after"):
        span("0.5.8", "0.5.6")


def test_readme_table_is_generated_from_the_rows() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "compat_table.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_compat_table_check_fails_on_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import compat_table
    finally:
        sys.path.remove(str(REPO / "scripts"))
    stale = tmp_path / "README.md"
    stale.write_text(compat_table.replace_table(f"x\n{compat_table.START}\n{compat_table.END}\ny\n", "| old |\n"))
    monkeypatch.setattr(compat_table, "README", stale)
    assert compat_table.main(["--check"]) == 1
    assert compat_table.main(["--write"]) == 0
    assert compat_table.main(["--check"]) == 0
    assert compat_table.render() in stale.read_text()


def _installed_release() -> str:
    return re.sub(r"\.post\d+$", "", metadata.version("sglang"))


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="sglang is not installed here")
def test_rows_that_apply_to_this_sglang_are_the_rows_that_list_it() -> None:
    import real_sglang

    from mixins.sglang_patch import SglangPatch, State

    real_sglang.import_targets()
    version = _installed_release()
    patch = SglangPatch(tag="targets-data")
    status = patch.install()
    patch.uninstall()
    applies = {s.target.qualname for s in status if s.state in (State.APPLIED, State.DEFERRED)}
    if version in ci_versions():
        listed = {t.qualname for t in TARGETS if version in t.verified_in}
        field = "verified_in"
    else:
        listed = {t.qualname for t in TARGETS if version in t.read_in}
        field = "read_in"
    assert applies == listed, (
        f"sglang {version}: rows that apply but lack it in {field}: {sorted(applies - listed)}; "
        f"rows listing it that do not apply: {sorted(listed - applies)}; status: {[str(s) for s in status]}"
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here (.ci/run installs it)")
def test_ci_has_a_step_for_every_suite(tmp_path: Path) -> None:
    """``.ci/Makefile`` (what ``.ci/run`` runs): one step per suite, none dropped by an edit."""
    dry_run = subprocess.run(["make", "-f", str(CI_STEPS), "-n", "all", f"CI_LOGS={tmp_path}"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    steps = set(re.findall(r"^bash \.ci/step (\S+) ", dry_run, re.MULTILINE))
    suites = {"exhaustive", "slow", "lint", "interop", "server", "core-torch-2.7.1", "core-torch-2.14.1",
              "analysis-without-torch",
              "sglang-0.5.23-torch-2.14.1", *(f"sglang-{version}" for version in ci_versions())}
    assert suites <= steps, f"missing: {sorted(suites - steps)}"
    # the README's test command, word for word, is a line of .ci/run itself
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, "the README is for users: testing and design go to docs/"
    command = next(line for line in readme.splitlines() if line.endswith(".venv/bin/python -m pytest -n auto"))
    assert any(line.startswith(command) for line in (REPO / ".ci" / "run").read_text().splitlines())
