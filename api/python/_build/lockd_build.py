"""The build backend of the lockd package: setuptools', with a fallback for
a setuptools that cannot build wheels by itself.

setuptools before 70.1 builds wheels with the separate ``wheel`` package. A
fresh venv of Debian 12's python3 has setuptools 66 and no ``wheel``, and
no package index need be reachable, so ``pip install --no-build-isolation
./api/python`` would fail there ("invalid command 'bdist_wheel'"). When
``wheel`` cannot be imported, this module writes the pure-Python wheel (and
the editable one) itself with zipfile, from the metadata in pyproject.toml;
otherwise setuptools does everything, as it does for sdists.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - the setuptools backend's hooks

ROOT = Path(__file__).resolve().parent.parent

if importlib.util.find_spec("wheel") is None:
    # Without these pip asks build_wheel/build_editable for the metadata.
    for _hook in ("prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable"):
        globals().pop(_hook, None)

    def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
        """Nothing beyond setuptools: the wheel is written here."""
        return []

    def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
        """Nothing beyond setuptools: the wheel is written here."""
        return []

    def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
        """Writes the wheel of the package's sources."""
        files = {p.relative_to(ROOT).as_posix(): p.read_bytes()
                 for p in sorted((ROOT / "lockd").iterdir()) if p.suffix == ".py" or p.name == "py.typed"}
        return _write_wheel(Path(wheel_directory), files)

    def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
        """Writes a wheel whose .pth file puts the source tree on sys.path."""
        return _write_wheel(Path(wheel_directory), {"__editable__.lockd.pth": f"{ROOT}\n".encode()})

    def _write_wheel(out: Path, files: dict[str, bytes]) -> str:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        name, version = project["name"], project["version"]
        info = f"{name}-{version}.dist-info"
        metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {project['description']}\n"
                    f"Requires-Python: {project['requires-python']}\n"
                    + "".join(f"Classifier: {c}\n" for c in project.get("classifiers", []))
                    + "Description-Content-Type: text/markdown\n\n" + (ROOT / project["readme"]).read_text())
        files = dict(files)
        files[f"{info}/METADATA"] = metadata.encode()
        files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: lockd_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        files[f"{info}/top_level.txt"] = f"{name}\n".encode()
        record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in files.items())
        files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
        filename = f"{name}-{version}-py3-none-any.whl"
        os.makedirs(out, exist_ok=True)
        with zipfile.ZipFile(out / filename, "w", zipfile.ZIP_DEFLATED) as z:
            for path, data in files.items():
                z.writestr(path, data)
        return filename

    def _digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

__all__ = [n for n in dir(_setuptools) if not n.startswith("_") and n in globals()]
