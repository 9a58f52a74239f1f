"""What a ``multiprocessing`` spawn child runs in the activation tests: import a runner module and drive
its real profiling path, with nothing in the child calling ``install()`` (only the .pth start-up hook
or sglang's own plugin loader may have patched sglang)."""

from __future__ import annotations

import json
from pathlib import Path


def capture_in_child(module: str, cls_name: str, report: str, load_plugins: bool) -> None:
    import cpu_shims

    cpu_shims.prepare()
    if load_plugins:
        from sglang.srt.plugins import load_plugins as sglang_load_plugins

        sglang_load_plugins()
    import real_sglang

    cls = real_sglang.load_class(module, cls_name)
    assert cls is not None, f"{module}.{cls_name} missing"
    real_sglang.run_capture_path(real_sglang.make_runner(cls))
    from mixins import sglang_patch, wait_for_exports

    wait_for_exports()
    Path(report).write_text(json.dumps({"installed": sglang_patch.PATCH.installed}))
