"""``import mixins`` / ``mixins.analysis`` and the CLI's parser import neither wrapt nor torch: the
package's public names load on first use (docs/DESIGN.md §4). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess

from core_helpers import PYTHON, subprocess_env

CODE = """
import json, sys
import mixins, mixins.analysis, mixins.cli
mixins.cli.build_parser()
heavy = ("wrapt", "torch", "mixins.capture_trace", "mixins.export", "mixins.sglang_patch")
before = sorted(m for m in heavy if m in sys.modules)
from mixins import with_capture_trace, wait_for_exports
import mixins.capture_trace, mixins.export
same = (with_capture_trace is mixins.capture_trace.with_capture_trace
        and wait_for_exports is mixins.export.wait_for_exports)
try:
    mixins.no_such_name
    missing = "no error"
except AttributeError as exc:
    missing = str(exc)
print(json.dumps({"before": before, "wrapt_after": "wrapt" in sys.modules, "same": same, "missing": missing,
                  "all": sorted(mixins.__all__), "dir_has_all": set(mixins.__all__) <= set(dir(mixins))}))
"""


def test_package_and_analyzer_import_without_wrapt_or_torch() -> None:
    env = subprocess_env(SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
    done = subprocess.run([PYTHON, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"] == []
    assert result["wrapt_after"] is True and result["same"] is True
    assert result["missing"] == "module 'mixins' has no attribute 'no_such_name'"
    assert result["all"] == ["CaptureTraceMixin", "export_cuda_graph_capture_trace", "wait_for_exports",
                             "with_capture_trace"]
    assert result["dir_has_all"] is True
