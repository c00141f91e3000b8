"""The Makefile's check of the variables typed on its command line: a misspelled knob (``make bench-cpu
MAXBYTES=64M``) would otherwise be ignored without a word. Make calls this with the names of the variables
given on its command line (``$(origin X)`` is ``command line``; the environment is not checked) and stops
with what it prints (one line, status 2) before any target starts::

    python3 scripts/make_vars.py NAME ...    prints nothing when every upper-case NAME is known

Known: every variable the Makefiles define or read (Makefile, mk/*.mk), each run-wide knob's make name
(suite/common/knobs.py KNOBS), each experiment knob (experiments/*/settings.py), each switch (docs/switches.md,
suite/common/switches.py, faults.py: checked against SWITCHES), what the compose files read, the launcher's multi-node
variables, and the environment of the libraries the ranks use (NCCL_*, TORCH_*, CUDA_*, ...: passed on to them).
The suggestion is the nearest known name (difflib). Standard library only, any Python 3: it runs before the
venv exists.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

UPPER = re.compile(r"[A-Z][A-Z0-9_]*")
LAUNCHER_ENV = ("NNODES", "NODE_RANK", "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "RANKS", "WORLD_SIZE")
"""What the launcher (suite/launch/preflight.py) and the compose and Slurm scripts read for a multi-node run."""
PASSED_ON = (
    "NCCL_", "GLOO_", "TORCH_", "TORCHELASTIC_", "PYTORCH_", "CUDA_", "NVIDIA_", "OMP_", "MKL_", "KMP_", "UCC_",
    "UCX_", "OMPI_", "I_MPI_", "HYDRA_", "MPICH_", "FI_", "TP_", "PYTHON", "PYTEST_", "DOCKER_", "COMPOSE_",
    "LC_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "TMPDIR", "PATH", "HOME", "LANG", "TERM", "TZ", "MAKE",
    "SHELL", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CI", "GITHUB_", "SLURM_", "SBATCH_",
)  # fmt: skip
"""Prefixes of variables that are not the suite's but the environment's (make passes a command-line variable to
its recipes' environment): the libraries', the shell's and make's own."""
_MAKE_DEF = re.compile(r"^(?:export\s+|override\s+)?([A-Z][A-Z0-9_]*)\s*(?:\?|::?|\+|!)?=", re.M)
_MAKE_REF = re.compile(r"\$\(([A-Z][A-Z0-9_]*)\)|\b(?:origin|ifn?def)\s+([A-Z][A-Z0-9_]*)")
_MAKE_EXPORT = re.compile(r"^export\s+([A-Z0-9_ ]+)$", re.M)


def _text(path: Path) -> str:
    """A file's text, or '' where it is missing (a partial copy of the repository must not stop make)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def makefile_names(root: Path = ROOT) -> set[str]:
    """Every upper-case variable the Makefiles define, export or read."""
    out: set[str] = set()
    for path in [root / "Makefile", *sorted((root / "mk").glob("*.mk"))]:
        text = _text(path)
        out.update(_MAKE_DEF.findall(text))
        out.update(a or b for a, b in _MAKE_REF.findall(text))
        for names in _MAKE_EXPORT.findall(text):
            out.update(names.split())
    return out


def knob_names(root: Path = ROOT) -> set[str]:
    """The suite's own names: the run-wide knobs, the experiments' knobs, the switches and what the compose files
    read (``make compose-up NODE0_GPUS=0,1``)."""
    out = set(re.findall(r'Knob\(\s*"[a-z_]+",\s*"[a-z-]+",\s*"([A-Z_]+)"', _text(root / "suite/common/knobs.py")))
    for path in sorted((root / "experiments").glob("*/settings.py")):
        out.update(re.findall(r'"env":\s*"([A-Z][A-Z0-9_]*)"', _text(path)))
    for path in ("docs/switches.md", "suite/common/switches.py", "suite/common/faults.py"):
        out.update(re.findall(r"[`\"](SUITE_[A-Z0-9_]+)[`\"]", _text(root / path)))
    for path in sorted(root.glob("docker-compose*.yml")):
        out.update(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", _text(path)))
    return out


def known(root: Path = ROOT) -> set[str]:
    return makefile_names(root) | knob_names(root) | set(LAUNCHER_ENV)


def refusal(names: list[str], root: Path = ROOT) -> str:
    """One line naming each unknown upper-case name with the nearest knob, or '' when all are known."""
    names = [n for n in names if UPPER.fullmatch(n) and not n.startswith(PASSED_ON)]
    if not names:
        return ""
    names_known = known(root)
    bad = [n for n in dict.fromkeys(names) if n not in names_known]
    if not bad:
        return ""
    choices = sorted(names_known)
    parts = []
    for n in bad:
        near = difflib.get_close_matches(n, choices, n=1, cutoff=0.6)
        parts.append(f"{n} (did you mean {near[0]}?)" if near else n)
    return (
        f'{", ".join(parts)}: no such knob, nothing started (the knobs: README "Knobs", mk/*.mk; another '
        "program's variable goes in the environment: NAME=value make ...)"
    )


if __name__ == "__main__":
    line = refusal(sys.argv[1:])
    if line:
        print(line)
