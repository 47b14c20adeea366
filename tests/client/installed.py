"""The client under test is the copy `pip install ./clients/python` puts in a clean venv of
its own (var/client-venv), not the source folder: that proves the package installs from the
folder alone, with only its declared dependencies.

The venv is built once per change of the client's files (a stamp of their contents) and shared
by the test workers (a file lock). The test process then imports `connect_client` from that
venv's site-packages — that package only: its dependencies, httpx and PyNaCl, are pinned to
the same versions in the project's venv (tests/client/test_install.py checks the venv's own
interpreter can import and use it with nothing else installed)."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCE = ROOT / "clients" / "python"
VENV = ROOT / "var" / "client-venv"
STAMP = VENV / "installed-from"
INSTALL_SECONDS = 600  # a cold build (isolated setuptools, wheels from the local index) took 45 s


def source_digest() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc") \
                and ".egg-info" not in str(path) and "build" not in path.relative_to(SOURCE).parts:
            digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def venv_python() -> Path:
    return VENV / "bin" / "python"


def site_packages() -> Path:
    [found] = (VENV / "lib").glob("python*/site-packages")
    return found


def ensure_installed() -> Path:
    """Build var/client-venv from scratch unless it already holds this exact source."""
    VENV.parent.mkdir(exist_ok=True)
    digest = source_digest()
    with open(VENV.parent / "client-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if STAMP.exists() and STAMP.read_text() == digest:
            return site_packages()
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=INSTALL_SECONDS)
        # A copy of the folder, so the build leaves nothing (build/, *.egg-info) in the source tree.
        staging = VENV / "source"
        shutil.copytree(SOURCE, staging, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        result = subprocess.run(
            [str(venv_python()), "-m", "pip", "install", "--quiet", str(staging)],
            capture_output=True, text=True, timeout=INSTALL_SECONDS,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pip install ./clients/python failed:\n{result.stdout}\n{result.stderr}")
        shutil.rmtree(staging)
        STAMP.write_text(digest)
    return site_packages()


def import_installed() -> ModuleType:
    """`connect_client` from the clean venv, registered as the one this process imports."""
    if "connect_client" in sys.modules:
        return sys.modules["connect_client"]
    package = ensure_installed() / "connect_client"
    spec = importlib.util.spec_from_file_location(
        "connect_client", package / "__init__.py", submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["connect_client"] = module
    spec.loader.exec_module(module)
    return module
