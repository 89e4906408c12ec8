"""The built wheel installs one top-level package, `fumarole`, and works beside python-daemon.

python-daemon's import name is `daemon`, the name of this repository's daemon/ folder; the
wheel must never put a `daemon` (nor a `store` or `api`) into site-packages. The test builds the
wheel from a copy of the checkout (setuptools, as `pip wheel` does), installs it into a new
virtualenv whose other packages come from the test venv (where python-daemon is installed, from
the dev lock), and runs the installed `fumarole` command from outside the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "fumarole", "daemon", "store", "api", "migrations")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert r.returncode == 0, r.stderr
    (found,) = out.glob("fumarole-*.whl")
    return found


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A new venv with the wheel installed; its dependencies (python-daemon among them) are the
    test venv's, reached through a .pth line (the test venv's own .pth files, the editable
    install of the checkout among them, are not run: only the new venv's are)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    (purelib / "deps-from-test-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # pip itself comes from the test venv too, but installs into the new venv (its sys.prefix),
    # so the console script's interpreter is the new venv's; --ignore-installed, or pip would
    # uninstall the test venv's editable install that it sees through the .pth line
    r = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--ignore-installed",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert r.returncode == 0, r.stderr
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(
        [str(env_dir / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        top_level = {n.split("/", 1)[0] for n in names}
        assert top_level == {
            "fumarole",
            wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
        }
        # package data travels with it: migrations (a link in the checkout), examples, the dashboard
        assert any(n.startswith("fumarole/store/migrations/0001_") for n in names)
        assert "fumarole/api/ui/assets/index.html" in names
        assert any(n.startswith("fumarole/daemon/examples/") and n.endswith(".yaml") for n in names)
        entry = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "fumarole = fumarole.daemon.cli:main" in entry


def test_python_daemon_and_fumarole_import_side_by_side(beside: Path, tmp_path: Path) -> None:
    probe = (
        "import daemon, fumarole.daemon.cli, fumarole.store.log, fumarole.api.app\n"
        "print(daemon.__file__)\n"
        "print(hasattr(daemon, 'DaemonContext'))\n"
        "print(fumarole.daemon.cli.__file__)\n"
    )
    r = _run(beside, "python", "-c", probe, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    python_daemon, has_context, ours = r.stdout.splitlines()
    assert has_context == "True", python_daemon  # `import daemon` is python-daemon's
    assert Path(ours).is_relative_to(beside)  # and Fumarole's modules come from the wheel
    assert not Path(ours).is_relative_to(ROOT)


def test_the_installed_command_runs_outside_the_checkout(beside: Path, tmp_path: Path) -> None:
    """The console script from the wheel: the bundled sample simulated on a fresh data directory
    (the migrations and the bundled scheduler configuration come from the package data), then the
    log read back."""
    data = tmp_path / "data"
    r = _run(beside, "fumarole", "run", "--data-dir", str(data), "--no-api", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "binds" in r.stdout, r.stdout
    r = _run(beside, "fumarole", "events", "--db", str(data / "fumarole.db"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"type":"decision.bind"' in r.stdout, r.stdout[-2000:]


def test_no_module_imports_the_bare_folder_names() -> None:
    """`import daemon` (or store, api) would load a second copy of a module (or python-daemon):
    every import names `fumarole.…`."""
    bare = re.compile(r"^\s*(?:from|import) (?:daemon|store|api)\b", re.M)
    found = [
        f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}"
        for folder in ("daemon", "store", "api", "tests", "bench", "scripts", "examples")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if ".venv" not in path.parts
        for text in [path.read_text(encoding="utf-8")]
        for m in bare.finditer(text)
    ]
    assert not found, found
