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
