"""The analyzer's one error for bad input, in a module of its own so that ``reader`` and ``safe_io`` both
raise it without importing each other."""

from __future__ import annotations

__all__ = ["TraceError"]


class TraceError(Exception):
    """Bad input, already phrased for ``capture-trace: error: <path>: <what>``."""

    def __init__(self, path: str, message: str, not_a_trace: bool = False, wrong_role: str | None = None) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        # valid JSON that is not a trace (execution_details.json, a config): a directory listing skips
        # such a file unless its name says it is a trace (``jobs.collect_results``)
        self.not_a_trace = not_a_trace
        # a trace of a role the command does not read (``model.roles``): skipped too, when listed
        self.wrong_role = wrong_role

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str, bool, str | None]]:  # survive process pools
        return (TraceError, (self.path, self.message, self.not_a_trace, self.wrong_role))
