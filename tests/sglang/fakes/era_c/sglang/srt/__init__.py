"""FAKE sglang package for sglang-capture-trace machinery tests."""
