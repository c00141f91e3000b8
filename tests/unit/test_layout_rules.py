"""Rule R3 of the layout: each kind of side effect has one named home.

- ``dist.new_group`` is called only in suite/harness/groups.py;
- the host is read (``/proc``, ``/sys/``, ``ioctl``, ``nvidia-smi``) only under suite/system/.

Checked on the syntax tree, so comments and docstrings that name them do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments")
GROUPS_HOME = "suite/harness/groups.py"


def _sources() -> dict[str, str]:
    return {
        p.relative_to(ROOT).as_posix(): p.read_text() for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
    }


def new_group_calls(source: str) -> list[int]:
    """Lines that call ``new_group`` (``dist.new_group(...)``, ``new_group(...)``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name == "new_group":
                out.append(node.lineno)
    return out


def test_new_group_is_called_only_in_the_groups_module():
    found = {path: lines for path, src in _sources().items() if (lines := new_group_calls(src))}
    assert set(found) == {GROUPS_HOME}, {p: v for p, v in found.items() if p != GROUPS_HOME}


def test_the_new_group_check_sees_calls_and_ignores_prose():
    src = '"""Made by new_group(...)."""\nimport torch.distributed as dist\n# new_group(x)\ng = dist.new_group([0])\n'
    assert new_group_calls(src) == [4]
    assert new_group_calls("from torch.distributed import new_group\ng = new_group(backend='gloo')\n") == [2]
    assert new_group_calls("x = 'new_group('\n") == []
