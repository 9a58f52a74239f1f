"""``import mixins`` / ``mixins.analysis`` and the CLI's parser import neither wrapt nor torch: the
package's public names load on first use (docs/DESIGN.md §4). Checked in a fresh interpreter."""

from __future__ import annotations

import json
from pathlib import Path

from core_helpers import child_env, export_env, run_case


def test_package_and_analyzer_import_without_wrapt_or_torch() -> None:
    env = child_env(SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
    done = run_case("lazy_imports", env=env, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"] == []
    assert result["wrapt_after"] is True and result["same"] is True
    assert result["missing"] == "module 'mixins' has no attribute 'no_such_name'"
    assert result["all"] == ["CaptureTraceMixin", "export_cuda_graph_capture_trace", "wait_for_exports",
                             "with_capture_trace"]
    assert result["dir_has_all"] is True


def test_the_exporter_side_never_imports_numpy(tmp_path: Path) -> None:
    """The bootstrap, the patch, the decorator and a real export (torch CPU profile, written to disk):
    none of our modules imports numpy (torch may, for itself); before torch, neither is loaded at all."""
    env = export_env(tmp_path, SGLANG_CAPTURE_TRACE_BACKGROUND="0", SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
    done = run_case("exporter_imports", env=env)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before_torch"] == []
    ours = ("mixins", "_sglang_capture_trace_bootstrap", "_sglang_capture_trace_switches")
    assert [m for m in result["importers"] if m is None or m.split(".")[0] in ours] == []
    assert len(list(tmp_path.glob("graph_capture_profile/cuda_graph_capture-PrefillCudaGraphRunner-*.json.gz"))) == 1
