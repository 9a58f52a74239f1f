"""A second local user for the attack tests: a forked child that drops to uid 65534 (``nobody``; the tests
run as root, as SGLang servers often do) and does what an attacker in a shared directory would.

``Nobody(action)`` runs ``action(ready, control_fd, reply_fd)`` in the child: the action calls ``ready()``
once its trap is set (the handshake the constructor waits on, never a sleep); ``control_fd`` turns readable
on :meth:`Nobody.sync` (``s``: the action answers a line on ``reply_fd``) and :meth:`Nobody.release` (``x``,
then end of file); the child holds what it opened until released. ``as_nobody(action)`` is the one-shot form.
Imported as ``tests.second_user``: standard library only.
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
    """``action(ready, control_fd, reply_fd)`` in a child running as uid 65534; its JSON-able result from
    :meth:`release`."""

    def __init__(self, action: Callable[[Callable[[], None], int, int], Any]) -> None:
        ready_r, ready_w = os.pipe()
        self._control_r, self._control_w = os.pipe()
        self._reply_r, reply_w = os.pipe()
        self._result_r, result_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # only os-level calls: no lock another thread holds
            code = 0
            said: list[int] = []
            try:
                for fd in (ready_r, self._result_r, self._control_w, self._reply_r):
                    os.close(fd)  # the control pipe's write end too: else a release never ends in EOF
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)

                def ready() -> None:
                    if not said:
                        said.append(os.write(ready_w, b"r"))

                result = action(ready, self._control_r, reply_w)
                ready()  # in case the action never called it
                while os.read(self._control_r, 1):  # hold everything open until released
                    pass
                payload = json.dumps(result).encode()
            except BaseException as exc:  # noqa: B036 - report anything to the parent
                payload, code = json.dumps({"error": repr(exc)}).encode(), 1
                if not said:
                    os.write(ready_w, b"r")
            os.write(result_w, payload)
            os._exit(code)
        for fd in (ready_w, result_w, reply_w, self._control_r):
            os.close(fd)
        got = os.read(ready_r, 1)
        os.close(ready_r)
        assert got == b"r", "the attacker went away before it was ready"

    def sync(self) -> list[str]:
        """A handshake: the action starts a whole round after this call and answers with what it attacked
        in it (a JSON list on one line), so whatever is in the directory now has provably been attacked."""
        os.write(self._control_w, b"s")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = os.read(self._reply_r, 65536)
            assert chunk, "the attacker went away"
            reply += chunk
        return list(json.loads(reply))

    def release(self) -> Any:
        os.write(self._control_w, b"x")
        os.close(self._control_w)
        chunks = []
        while chunk := os.read(self._result_r, 65536):
            chunks.append(chunk)
        os.close(self._result_r)
        os.close(self._reply_r)
        _, status = os.waitpid(self.pid, 0)
        result = json.loads(b"".join(chunks) or b"null")
        assert os.waitstatus_to_exitcode(status) == 0, result
        return result


def as_nobody(action: Callable[[], Any]) -> Any:
    """Run ``action`` once as uid 65534 and return its result."""
    return Nobody(lambda _ready, _control, _reply: action()).release()
