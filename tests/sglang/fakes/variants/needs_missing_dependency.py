"""FAKE runner module whose import fails on a missing third-party dependency."""
import capture_trace_no_such_dependency  # noqa: F401


class XPUGraphRunner:
    pass
