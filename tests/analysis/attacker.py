"""A second local user for the analyzer's attack tests: a forked child that drops to uid 65534
(``nobody``; the tests run as root) and does what an attacker in a shared directory would.

``Nobody(action)`` runs ``action(ready, release_fd)`` in the child; the action calls ``ready()`` once its
trap is set (the handshake the test waits on, never a sleep), and the child then holds what it opened
until :meth:`Nobody.release` (``release_fd`` turns readable then, for an action that watches it itself).
``as_nobody(action)`` is the one-shot form.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NOBODY = 65534


@contextmanager
def shared_sticky_dir() -> Iterator[Path]:
    """A directory like ``/tmp`` (root's, mode 1777, sticky) that both uids can reach; removed after."""
    base = Path(tempfile.mkdtemp(prefix="capture-trace-shared-", dir="/tmp"))
    os.chmod(base, 0o1777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


class Nobody:
    """``action(ready)`` in a child running as uid 65534; its JSON-able result from :meth:`release`."""

    def __init__(self, action: Callable[[Callable[[], None], int], Any]) -> None:
        ready_r, ready_w = os.pipe()
        self._go_r, self._go_w = os.pipe()
        self._result_r, result_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # only os-level calls: no lock another thread holds
            code = 0
            said: list[int] = []
            try:
                os.close(ready_r)
                os.close(self._result_r)
                os.close(self._go_w)  # else the wait for release never sees EOF
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)

                def ready() -> None:
                    if not said:
                        said.append(os.write(ready_w, b"r"))

                result = action(ready, self._go_r)
                ready()  # in case the action never called it
                os.read(self._go_r, 1)  # hold everything open until the test is done
                payload = json.dumps(result).encode()
            except BaseException as exc:  # noqa: B036 - report anything to the parent
                payload, code = json.dumps({"error": repr(exc)}).encode(), 1
                if not said:
                    os.write(ready_w, b"r")
            os.write(result_w, payload)
            os._exit(code)
        os.close(ready_w)
        os.close(result_w)
        os.close(self._go_r)
        got = os.read(ready_r, 1)
        os.close(ready_r)
        assert got == b"r", "the attacker went away before it was ready"

    def release(self) -> Any:
        os.write(self._go_w, b"g")
        os.close(self._go_w)
        chunks = []
        while chunk := os.read(self._result_r, 65536):
            chunks.append(chunk)
        os.close(self._result_r)
        _, status = os.waitpid(self.pid, 0)
        result = json.loads(b"".join(chunks) or b"null")
        assert os.waitstatus_to_exitcode(status) == 0, result
        return result


def as_nobody(action: Callable[[], Any]) -> Any:
    """Run ``action`` once as uid 65534 and return its result."""
    return Nobody(lambda _ready, _release: action()).release()
