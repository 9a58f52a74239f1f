"""``import mixins`` / ``mixins.analysis`` and the CLI's parser import neither wrapt nor torch: the
package's public names load on first use (docs/DESIGN.md §4). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess

from core_helpers import child, child_env


def test_package_and_analyzer_import_without_wrapt_or_torch() -> None:
    env = child_env(SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
    done = subprocess.run(child("lazy_imports"), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"] == []
    assert result["wrapt_after"] is True and result["same"] is True
    assert result["missing"] == "module 'mixins' has no attribute 'no_such_name'"
    assert result["all"] == ["CaptureTraceMixin", "export_cuda_graph_capture_trace", "wait_for_exports",
                             "with_capture_trace"]
    assert result["dir_has_all"] is True
