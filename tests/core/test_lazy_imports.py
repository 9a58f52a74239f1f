"""``import mixins`` / ``mixins.analysis`` and the CLI's parser import neither wrapt nor torch: the
package's public names load on first use (docs/DESIGN.md §4). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
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


# The child: notes which module first asks for numpy (the frame that ran ``import numpy``), then exports a
# real CPU capture through the class decorator's profile mode and loads the rest of the exporter side.
_EXPORTER_CHILD = '''
import json, sys

importers = []


class Watch:
    """Records who imports numpy; finds nothing itself (the real finders still do)."""

    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            importers.append(frame.f_globals.get("__name__") if frame is not None else None)
        return None


sys.meta_path.insert(0, Watch())
import _sglang_capture_trace_bootstrap
import mixins.lazy_trace, mixins.memory_snapshot
from mixins import sglang_patch, with_capture_trace

sglang_patch.PATCH.install()
sglang_patch.PATCH.uninstall()
ours_before_torch = sorted(m for m in ("numpy", "torch") if m in sys.modules)
import torch


@with_capture_trace(profile="capture", shape_method="capture_one_shape", shape_unit="tokens")
class PrefillCudaGraphRunner:
    def capture(self):
        for size in (4, 2):
            self.capture_one_shape(size)

    def capture_one_shape(self, size):
        return torch.mm(torch.ones(size, 8), torch.ones(8, 3))


PrefillCudaGraphRunner().capture()
print(json.dumps({"before_torch": ours_before_torch, "importers": importers}))
'''


def test_the_exporter_side_never_imports_numpy(tmp_path: Path) -> None:
    """The bootstrap, the patch, the decorator and a real export (torch CPU profile, written to disk):
    none of our modules imports numpy (torch may, for itself); before torch, neither is loaded at all."""
    env = export_env(tmp_path, SGLANG_CAPTURE_TRACE_BACKGROUND="0", SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0")
    done = subprocess.run([sys.executable, "-c", _EXPORTER_CHILD], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before_torch"] == []
    ours = ("mixins", "_sglang_capture_trace_bootstrap", "_sglang_capture_trace_switches")
    assert [m for m in result["importers"] if m is None or m.split(".")[0] in ours] == []
    assert len(list(tmp_path.glob("graph_capture_profile/cuda_graph_capture-PrefillCudaGraphRunner-*.json.gz"))) == 1
