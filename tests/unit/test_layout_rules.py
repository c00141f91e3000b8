"""Rule R3 of the layout: each kind of side effect has one named home.

- ``dist.new_group`` is called only in suite/harness/groups.py;
- the host is read (``/proc``, ``/sys/``, ``ioctl``, ``nvidia-smi``) only under suite/system/.

Checked on the syntax tree, so comments and docstrings that name them do not count. Also: no module
binds a top-level name twice (the first binding would be dead, as ``GLOO_PATHS`` once was), and one
table maps names to ``ReduceOp`` (suite/ops/collectives.py's ``REDUCE_OP``); within suite/system/ no function is
defined twice and ``nvidia-smi topo -m`` runs in one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments")
GROUPS_HOME = "suite/harness/groups.py"
SYSTEM_HOME = "suite/system/"


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


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (of a module, class or function, or of an attribute)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                out.add(id(stmt.value))
    return out


def host_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use that reads the host: a string that starts with /proc/ or /sys/ (an
    f-string's leading part too) or is the nvidia-smi command, and any use of the name ``ioctl``.
    Docstrings and comments do not count, nor does prose that merely mentions them."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value.startswith(("/proc/", "/sys/")) or node.value == "nvidia-smi":
                out.append((node.lineno, node.value))
        elif isinstance(node, ast.Attribute) and node.attr == "ioctl":
            out.append((node.lineno, "ioctl"))
        elif isinstance(node, ast.Name) and node.id == "ioctl":
            out.append((node.lineno, "ioctl"))
        elif isinstance(node, ast.ImportFrom) and any(a.name == "ioctl" for a in node.names):
            out.append((node.lineno, "ioctl"))
    return sorted(out)


def test_the_host_is_read_only_under_suite_system():
    found = {
        path: reads
        for path, src in _sources().items()
        if not path.startswith(SYSTEM_HOME) and (reads := host_reads(src))
    }
    assert not found, found


HOST_READS_AND_PROSE = '''"""Reads /proc/self/status and runs nvidia-smi."""
import fcntl, os, shutil
# open('/proc/net/route')
a = open('/proc/net/route')
b = f'/sys/bus/pci/devices/{x}/numa_node'
c = shutil.which('nvidia-smi')
d = fcntl.ioctl(0, 1, b'')
e = 'from nvidia-smi topo -m'
def f():
    "lists /proc/self/task"
'''


def test_the_host_read_check_sees_reads_and_ignores_prose():
    assert host_reads(HOST_READS_AND_PROSE) == [
        (4, "/proc/net/route"),
        (5, "/sys/bus/pci/devices/"),
        (6, "nvidia-smi"),
        (7, "ioctl"),
    ]
    assert host_reads("from fcntl import ioctl\n") == [(1, "ioctl")]


def rebound_names(source: str) -> list[str]:
    """Names a module binds more than once at its top level (``X = ...`` twice: the first is dead)."""
    seen: list[str] = []
    for stmt in ast.parse(source).body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        for t in targets:
            for n in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                if isinstance(n, ast.Name):
                    seen.append(n.id)
    return sorted({n for n in seen if seen.count(n) > 1})


def test_no_module_binds_a_top_level_name_twice():
    found = {path: names for path, src in _sources().items() if (names := rebound_names(src))}
    assert not found, found


def test_the_rebinding_check_sees_a_second_binding_only():
    assert rebound_names("A = 1\nB: int = 2\nA, C = 3, 4\nD = {}\nD['k'] = 5\n") == ["A"]


def reduce_op_tables(source: str) -> list[int]:
    """Lines of dict literals mapping names to ``ReduceOp`` members (a str -> ReduceOp table)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict) and node.values:
            if all(isinstance(v, ast.Attribute) and "ReduceOp" in ast.unparse(v.value) for v in node.values):
                out.append(node.lineno)
    return out


def test_one_table_maps_reduce_op_names():
    found = {path: lines for path, src in _sources().items() if (lines := reduce_op_tables(src))}
    assert sum(len(v) for v in found.values()) == 1, found


def test_the_reduce_op_table_check_sees_tables_only():
    src = "import torch.distributed as dist\nT = {'sum': dist.ReduceOp.SUM, 'max': dist.ReduceOp.MAX}\nU = {'a': 1}\n"
    assert reduce_op_tables(src) == [2]


def top_level_functions(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_no_two_host_probe_modules_define_the_same_function():
    # one reader per thing under suite/system/ (placement once kept its own copy of sysinfo's file reader
    # and of its nvidia-smi topo call)
    seen: dict[str, str] = {}
    twice = []
    for path, src in _sources().items():
        if path.startswith(SYSTEM_HOME):
            for name in top_level_functions(src):
                if name in seen:
                    twice.append((name, seen[name], path))
                seen.setdefault(name, path)
    assert not twice, twice


def test_nvidia_smi_topo_is_run_in_one_place():
    argv = "['nvidia-smi', 'topo', '-m']"
    found = [
        (path, node.lineno)
        for path, src in _sources().items()
        for node in ast.walk(ast.parse(src))
        if isinstance(node, ast.List) and ast.unparse(node).replace('"', "'") == argv
    ]
    assert len(found) == 1, found


# --- rule R4: every private API of torch, pytest or pytest-benchmark sits behind a named adapter ---------

ADAPTERS = {
    "suite/harness/pytest/bench_adapter.py": "pytest-benchmark's stats and session (exact version)",
    "suite/harness/pytest/terminal.py": "pytest's terminal writer (major version)",
    "suite/harness/c10d.py": "c10d's sequence numbers, group names, flight-recorder dump (torch 2.13)",
    "experiments/ddp/internals.py": "DDP's logger, reducer buckets, first bucket cap (torch 2.13)",
    "experiments/sharded/internals.py": "CommDebugMode's internals, fake process group, pytree (torch 2.13)",
}
"""The modules allowed to reach a private name, each with what it adapts (each checks its version or
falls back where the name is missing)."""
OWN_PRIVATE = {"_exit", "_current_frames"}
"""Private-looking names that are documented API: ``os._exit``, ``sys._current_frames``."""


def private_uses(source: str) -> list[str]:
    """'line: what' for each private name reached: ``x._name`` on anything but ``self``/``cls``, by name
    (``getattr(x, "_name")``), and an import of a module or name with a private part (``_pytest.terminal``,
    ``from torch.utils import _pytree``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = ast.unparse(node.value)
            if base not in ("self", "cls") and node.attr not in OWN_PRIVATE:
                out.append(f"{node.lineno}: {base}.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and ast.unparse(node.args[0]) not in ("self", "cls")
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
        ):
            out.append(f"{node.lineno}: {node.func.id}({ast.unparse(node.args[0])}, {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            names = node.module.split(".") + [a.name for a in node.names]
            if any(n.startswith("_") and not n.startswith("__") for n in names):
                out.append(f"{node.lineno}: from {node.module} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import):
            out += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if any(n.startswith("_") and not n.startswith("__") for n in a.name.split("."))
            ]
    return out


def test_private_apis_are_reached_only_through_the_adapters():
    found = {p: uses for p, src in _sources().items() if p not in ADAPTERS and (uses := private_uses(src))}
    assert not found, f"a private name outside the adapters ({', '.join(ADAPTERS)}): {found}"
    assert all(private_uses(_sources()[p]) for p in ADAPTERS)  # none stale


def test_the_private_api_check_sees_attributes_and_imports_not_own_state():
    src = (
        '"""uses ddp._get_ddp_logging_data"""\n'
        "import os\nfrom torch.utils._pytree import tree_flatten\n"
        "from torch.distributed.tensor.debug import _comm_mode\n"
        "class A:\n    def f(self, tr):\n        self._x = 1\n        tr._tw = None\n        os._exit(0)\n"
        "        getattr(tr, '_get_data', None)\n        getattr(tr, '__name__')\n"
    )
    assert sorted(private_uses(src)) == [
        "10: getattr(tr, '_get_data')",
        "3: from torch.utils._pytree import tree_flatten",
        "4: from torch.distributed.tensor.debug import _comm_mode",
        "8: tr._tw",
    ]
