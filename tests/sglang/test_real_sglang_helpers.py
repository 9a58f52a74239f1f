"""The real-sglang test helpers tell a class missing in this sglang (skip) from a dependency missing in the
venv (failure naming it). Runs anywhere: the "sglang" here is a package written to tmp_path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import real_sglang


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A FAKE package ``fake_sglang_pkg``: one runner module importing a third-party package that is not
    installed, one importing fine."""
    root = tmp_path / "fake_sglang_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "needs_dep.py").write_text("import xgrammar_not_installed_here\nclass Runner: pass\n")
    (root / "fine.py").write_text("class Runner: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fake_sglang_pkg"
    for name in [m for m in sys.modules if m.startswith("fake_sglang_pkg")]:
        del sys.modules[name]


def test_missing_module_or_class_is_none(fake_sglang: str) -> None:
    assert real_sglang.load_class(f"{fake_sglang}.fine", "Runner").__name__ == "Runner"
    assert real_sglang.load_class(f"{fake_sglang}.fine", "Absent") is None
    assert real_sglang.load_class(f"{fake_sglang}.no_such_module", "Runner") is None
    assert real_sglang.load_class(f"{fake_sglang}.no_such_package.module", "Runner") is None


def test_missing_dependency_fails_naming_it(fake_sglang: str) -> None:
    with pytest.raises(real_sglang.MissingDependency, match="needs xgrammar_not_installed_here"):
        real_sglang.load_class(f"{fake_sglang}.needs_dep", "Runner")
