"""Fixtures of the installed-package tests live in installed_venvs.py (shared with the tests)."""

from installed_venvs import editable_venv, foreign_venv, project_wheel, wheel_venv  # noqa: F401
