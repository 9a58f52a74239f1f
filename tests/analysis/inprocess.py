"""An analyzer command run in-process through argparse, as the console script does, with its stdout and
stderr captured here rather than by capsys, so a module-scoped fixture can run it once for many tests."""

from __future__ import annotations

import argparse
import contextlib
import io
import os


def run_analyzer(*argv: object) -> tuple[int, str, str]:
    from mixins.analysis import cli

    parser = argparse.ArgumentParser(prog="capture-trace")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.add_commands(sub)
    args = parser.parse_args([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc: int = args.func(args)
    return rc, out.getvalue(), err.getvalue()
