"""The Python package as an installer sees it: one version (the CMake
project's, the C API's faVersion() and flashmlir.__version__), the
pyproject metadata naming it and the dependencies, and `import flashmlir`
registering the torch operators where torch is installed.
scripts/test-install.sh installs it (cmake --install, pip install ./python)
and imports it from there."""
import ctypes
import re
import sys

import pytest

from conftest import ROOT


def _cmake_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(flash-mlir VERSION ([0-9.]+)", text).group(1)


def test_one_version(flashmlir, build_dir):
    assert flashmlir.__version__ == _cmake_version()
    capi = build_dir / "lib" / "libFlashMLIRCAPI.so"
    if not capi.exists():
        pytest.skip("no shared C API library in this (sanitizer) build")
    lib = ctypes.CDLL(str(capi))
    lib.faVersion.restype = ctypes.c_char_p
    assert lib.faVersion().decode() == flashmlir.__version__


def test_pyproject_declares_the_package():
    try:
        import tomllib
    except ImportError:
        pytest.skip(f"python {sys.version_info[:2]} has no tomllib")
    meta = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == "flashmlir"
    assert project["dynamic"] == ["version"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"]["attr"] == \
        "flashmlir._version.__version__"
    assert any(d.startswith("numpy") for d in project["dependencies"])
    assert any(d.startswith("torch")
               for d in project["optional-dependencies"]["torch"])
    assert meta["build-system"]["build-backend"] == "setuptools.build_meta"
