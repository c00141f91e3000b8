"""`pip install .` installs the whole product: every package under suite/ and experiments/."""

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import ROOT


def test_the_wheel_holds_every_package(tmp_path):
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ and *.egg-info there
    src.mkdir()
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("suite", "experiments"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    held = {n.rsplit("/", 1)[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/__init__.py")}
    packages = {
        str(p.parent.relative_to(ROOT)) for pkg in ("suite", "experiments") for p in (ROOT / pkg).rglob("__init__.py")
    }
    assert packages - held == set(), "packages `pip install .` leaves out"


def test_make_venv_refuses_an_older_python_in_one_line_before_creating_anything(tmp_path):
    """The product's number formats use Python 3.11's ``z`` option: on 3.10 they would raise mid-run, so
    ``make venv`` stops first, naming the version it found and the knob that picks another Python."""
    old = tmp_path / "python3.10"  # this interpreter, reporting itself as 3.10 (an old python on PATH)
    old.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; sys.version_info = (3, 10, 14); '
        f'sys.version = \'3.10.14 (main)\'; exec(sys.argv[1])" "$2"\n'
    )
    old.chmod(0o755)
    venv = tmp_path / "venv"
    r = subprocess.run(
        ["make", "-s", "venv", f"PYTHON={old}", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode != 0 and not venv.exists()
    (line,) = [ln for ln in r.stderr.splitlines() if not ln.startswith("make")]
    assert line.startswith("error: the suite needs Python >= 3.11") and "this is 3.10.14" in line and "PYTHON=" in line
