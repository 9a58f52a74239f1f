"""Interpreter start-up hook, imported by ``sglang_capture_trace.pth`` only when
``SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE`` is on (the .pth line checks that without importing anything).

Why a .pth: sglang before 0.5.13 has no plugin loader, and its scheduler processes are started with
``spawn``, so a patch made in the launching process does not exist where graphs are captured. A .pth
runs in every interpreter of the environment (as coverage's and pytest-cov's do), so each process
registers the lazy post-import hooks itself. Honours sglang's ``SGLANG_PLUGINS`` allow-list (by our
plugin name ``capture_trace``) and ``SGLANG_CAPTURE_TRACE_STARTUP_HOOK=0`` turns this hook off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

STARTUP_SWITCH = "SGLANG_CAPTURE_TRACE_STARTUP_HOOK"
PLUGINS_ALLOW_LIST = "SGLANG_PLUGINS"
PLUGIN_NAME = "capture_trace"


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """The trace switch is on, this hook is not switched off, and SGLANG_PLUGINS (if set) allows us."""
    from mixins import settings

    if not settings.parse_env_bool(environ.get(settings.ENABLE), name=settings.ENABLE, default=False):
        return False
    if not settings.parse_env_bool(environ.get(STARTUP_SWITCH), name=STARTUP_SWITCH, default=True):
        return False
    allowed = {name.strip() for name in environ.get(PLUGINS_ALLOW_LIST, "").split(",") if name.strip()}
    return not allowed or PLUGIN_NAME in allowed


def run() -> None:
    """Install the sglang post-import hooks if wanted; never raises (this runs inside site.py)."""
    try:
        if wanted():
            from mixins import sglang_patch

            sglang_patch.install()
    except Exception:
        logging.getLogger("mixins").warning("sglang-capture-trace: start-up hook failed", exc_info=True)


run()
