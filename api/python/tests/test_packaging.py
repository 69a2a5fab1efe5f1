"""The package installs offline into a fresh venv (pip install
--no-build-isolation --no-index), typed, and works from there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import PACKAGE, Cluster


def test_installs_into_a_fresh_venv(fresh_venv: Path, tmp_path: Path, dev: Cluster) -> None:
    venv = fresh_venv
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(PACKAGE)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    probe = ("import lockd, pathlib, sys; "
             "d = pathlib.Path(lockd.__file__).parent; "
             "assert (d / 'py.typed').exists() and (d / 'aio.py').exists(), list(d.iterdir()); "
             "assert 'site-packages' in str(d), d; "
             "c = lockd.Client(sys.argv[1]); "
             "s = c.session(ttl=5); g = s.lock('install/x', wait=5); "
             "assert c.check('install/x', g.token); s.close(); print(g.token)")
    r = subprocess.run([str(py), "-c", probe, dev.addrs[0]], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(r.stdout) > 0


def test_modules_import_without_cycles() -> None:
    """The package's modules form no import cycle (typing-only imports
    included): each imports only modules below it, in this order."""
    import ast

    order = ["errors", "types", "_transport", "_keeper", "session", "client", "aio"]
    for i, name in enumerate(order):
        tree = ast.parse((PACKAGE / "lockd" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert node.module in order[:i], f"{name}.py imports .{node.module}, which is not below it"
