"""``doctor.import_cleanly``: a package whose ``__init__`` failed after importing a namespace subpackage
leaves that subpackage in ``sys.modules`` without its parent; an import below it must then fail the way the
package fails, not with ``KeyError: '<package>'`` (seen with sglang's ``multimodal_gen`` when an optional
dependency of the diffusion runtime is missing)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mixins.doctor import import_cleanly

PKG = "capture_trace_orphan_pkg"


@pytest.fixture
def broken_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real package on disk: its ``__init__`` imports ``sub.a`` (``sub`` a namespace package, as
    ``multimodal_gen.runtime`` is) and then fails, as an import of a missing optional dependency would."""
    (tmp_path / PKG / "sub").mkdir(parents=True)
    (tmp_path / PKG / "__init__.py").write_text(f"import {PKG}.sub.a\nraise ImportError('no optional dependency')\n")
    (tmp_path / PKG / "sub" / "a.py").write_text("")
    (tmp_path / PKG / "sub" / "b.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield PKG
    finally:
        for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
            del sys.modules[name]


def test_an_import_below_a_failed_package_fails_as_the_package_does(broken_package: str) -> None:
    with pytest.raises(ImportError, match="no optional dependency"):
        importlib.import_module(broken_package)  # a plain import: Python drops the package, not its children
    assert f"{broken_package}.sub" in sys.modules and broken_package not in sys.modules
    with pytest.raises(ImportError, match="no optional dependency"):
        import_cleanly(f"{broken_package}.sub.b")
    assert not [m for m in sys.modules if m.startswith(broken_package)]
