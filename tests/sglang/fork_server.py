"""Fresh processes for the real-sglang order matrix (``test_real_sglang.py``), forked from one server
that has already imported the third-party modules sglang's runner modules pull in (torch, transformers,
openai, triton, ...). Never sglang's own modules, nor this project's: their import order against
``install()`` is what the matrix tests, so each order still imports them, and only them, in a process
that has never seen them. A child costs what importing sglang itself costs: ~6 s instead of ~18 s.

Which modules: the first request runs with nothing preloaded and reports the modules it ended with;
the server then imports those that are third-party (``_third_party``), in the order they were first
imported. A module that fails to import here is left to the children, as before. The list is kept in
the environment it was learnt in (``LEARNT``, in ``sys.prefix``: CI's cached venv per sglang version),
so a later run preloads before its first request and no request pays the whole import (~11 s a
version); a stale or unwritable list only costs that time again, never a result.

Protocol, one JSON object per line: requests on stdin ``{"module": ..., "argv": [...], "env": {...}}``
(``python -m module argv...`` with exactly that environment), replies on stdout ``{"rc": ...,
"stdout": ..., "stderr": ...}``. Run it with the environment the children should start from
(``SGLANG_CAPTURE_TRACE_STARTUP_HOOK=0``: the .pth hook must not have installed anything).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import shutil
import sys
import tempfile
import traceback
import warnings
from typing import Any

import cpu_shims

#: top-level names whose import order the tests are about, or that are the tests' own
NOT_PRELOADED = frozenset({
    "sglang", "mixins", "_sglang_capture_trace_bootstrap", "_sglang_capture_trace_switches", "real_sglang",
    "cpu_shims", "orders", "fork_server", "__main__", "__mp_main__",
})


def _third_party(modules: list[str]) -> list[str]:
    return [name for name in modules if name.split(".")[0] not in NOT_PRELOADED]


def _preload(modules: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _third_party(modules):
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001, S112 - left to the children, which import it themselves
                    continue


def _child(request: dict[str, Any], out: int, err: int, modules_path: str) -> None:
    """In the forked child: become ``python -m module argv...``; never returns."""
    rc = 0
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["module"], *request["argv"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        atexit._run_exitfuncs()
        with open(modules_path, "w") as f:
            json.dump(list(sys.modules), f)
    except BaseException:  # noqa: BLE001 - the child's traceback is its stderr, as in a real process
        traceback.print_exc()
        rc = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)


def _run(request: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    # mkdtemp, not TemporaryDirectory: the child runs the exit functions, weakref finalizers included
    tmp = tempfile.mkdtemp(prefix="fork-server-")
    try:
        paths = [os.path.join(tmp, name) for name in ("stdout", "stderr", "modules.json")]
        out, err = (os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600) for p in paths[:2])
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, out, err, paths[2])
        os.close(out)
        os.close(err)
        _, status = os.waitpid(pid, 0)
        texts = []
        for p in paths[:2]:
            with open(p, errors="replace") as f:
                texts.append(f.read())
        modules: list[str] = []
        if os.path.exists(paths[2]):
            with open(paths[2]) as f:
                modules = json.load(f)
    finally:
        shutil.rmtree(tmp)
    return {"rc": os.waitstatus_to_exitcode(status), "stdout": texts[0], "stderr": texts[1]}, modules


#: where this environment's third-party modules are remembered once learnt
LEARNT = os.path.join(sys.prefix, ".capture-trace-fork-server-modules.json")


def _learnt() -> list[str]:
    try:
        with open(LEARNT) as f:
            modules = json.load(f)
    except (OSError, ValueError):
        return []
    return [m for m in modules if isinstance(m, str)] if isinstance(modules, list) else []


def _remember(modules: list[str]) -> None:
    tmp = f"{LEARNT}.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(_third_party(modules), f)
        os.replace(tmp, LEARNT)
    except OSError:  # a read-only environment: learnt again next time
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def main() -> None:
    cpu_shims.prepare()  # before torch's users: the torchvision operators, sglang 0.5.5's sgl_kernel stub
    known = _learnt()
    _preload(known)
    preloaded = bool(known)
    for line in sys.stdin:
        reply, modules = _run(json.loads(line))
        print(json.dumps(reply), flush=True)
        if not preloaded and modules:
            _preload(modules)
            _remember(modules)
            preloaded = True


if __name__ == "__main__":
    main()
