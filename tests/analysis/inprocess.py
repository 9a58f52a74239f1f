"""An analyzer command run in-process through the console script's parser (``mixins.cli.build_parser``), with
its stdout and stderr captured here rather than by capsys, so a module-scoped fixture can run it once for many
tests."""

from __future__ import annotations

import contextlib
import io
import os


def run_analyzer(*argv: object) -> tuple[int, str, str]:
    from mixins.cli import build_parser

    args = build_parser(str(argv[0])).parse_args([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc: int = args.func(args)
    return rc, out.getvalue(), err.getvalue()
