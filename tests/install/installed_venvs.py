"""Fresh virtual environments with this project really installed by pip, as a user gets it: from the
wheel (non-editable), editable (``pip install -e``), and the wheel with a foreign distribution that ships
a top-level ``mixins`` installed after it. No torch in any of them (the analyzer-only install).

Built once per test run: with pytest-xdist the first worker builds under a lock in the run's shared base
temp directory and the others reuse it (tests/built_once.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from tests.built_once import built_once

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The runtime dependencies without torch (rich's own: markdown-it-py, mdurl, pygments; numpy: the analyzer's
# columns), pinned to the versions this interpreter has so pip resolves nothing and reuses its cache.
RUNTIME = ("wrapt", "msgspec", "rich", "numpy", "markdown-it-py", "mdurl", "pygments")
FOREIGN_MARK = "FOREIGN_MIXINS_IMPORTED"


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    @property
    def site_packages(self) -> Path:
        return next((self.root / "lib").glob("python3*/site-packages"))

    def run(self, case: str, cwd: Path, *options: str, args: tuple[str, ...] = (),
            **env: str) -> subprocess.CompletedProcess[str]:
        """``python [options] -m install_child case args...`` with a clean environment: no SGLANG_* and on
        PYTHONPATH only what is given, then this directory (which holds install_child.py and no package)."""
        command = [self.python, *options, "-m", "install_child", case, *args]
        env = clean_env(**env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(HERE)) if p)
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "PYTHON"))}
    env.update(extra)
    return env


def _run(*cmd: str, cwd: Path | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env=clean_env())
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def pip_install(venv: Venv, *args: str) -> None:
    """This interpreter's pip installing into ``venv`` (``--python``, pip >= 22.3): no ensurepip per venv."""
    _run(sys.executable, "-m", "pip", "--python", venv.python, "install", "-q", "--no-deps", *args)


def _new_venv(root: Path, *packages: str) -> Venv:
    _run(sys.executable, "-m", "venv", "--without-pip", str(root))
    venv = Venv(root)
    pip_install(venv, *(f"{name}=={metadata.version(name)}" for name in RUNTIME), *packages)
    return venv


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_foreign_wheel(directory: Path) -> Path:
    """A real wheel of another distribution ("foreign-mixins") whose top-level package is ``mixins``,
    like PyPI's ``mixins`` / ``django-mixins``. Importing it leaves a mark on stderr."""
    files = {
        "mixins/__init__.py": f'import sys\nsys.stderr.write("{FOREIGN_MARK}\\n")\n'.encode(),
        "foreign_mixins-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: foreign-mixins\nVersion: 1.0\n",
        "foreign_mixins-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()]
    record.append("foreign_mixins-1.0.dist-info/RECORD,,")
    path = directory / "foreign_mixins-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("foreign_mixins-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="session")
def project_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(target: Path) -> dict:
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(target), str(REPO))
        return {"wheel": str(next(target.glob("sglang_capture_trace-*.whl")))}

    return Path(built_once(tmp_path_factory, "wheel", build)["wheel"])


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory, project_wheel: Path) -> Venv:
    return Venv(Path(built_once(tmp_path_factory, "venv-wheel",
                            lambda t: {"root": str(_new_venv(t / "venv", str(project_wheel)).root)})["root"]))


@pytest.fixture(scope="session")
def editable_venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return Venv(Path(built_once(tmp_path_factory, "venv-editable",
                            lambda t: {"root": str(_new_venv(t / "venv", "-e", str(REPO)).root)})["root"]))


@pytest.fixture(scope="session")
def foreign_venv(tmp_path_factory: pytest.TempPathFactory, project_wheel: Path) -> Venv:
    """Ours first, then the foreign distribution, which overwrites ``mixins/__init__.py``."""

    def build(target: Path) -> dict:
        venv = _new_venv(target / "venv", str(project_wheel))
        pip_install(venv, str(write_foreign_wheel(target)))
        return {"root": str(venv.root)}

    return Venv(Path(built_once(tmp_path_factory, "venv-foreign", build)["root"]))
