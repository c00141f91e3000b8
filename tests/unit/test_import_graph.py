"""The layers point one way: experiments import only suite's public case API, never the pytest
bridge, the harness or each other, and suite/ + experiments/ have no import circle."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments")
FORBIDDEN_FOR_EXPERIMENTS = {"suite.plugin", "suite.runner", "suite.results", "suite.bench_adapter"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@functools.cache  # parsing every module takes a while; two tests read the graph
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports (top level and inside functions alike)."""
    mods = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for n in names:
                if n in mods and n != mod:
                    graph[mod].add(n)
    return {m: frozenset(deps) for m, deps in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_in_suite_and_experiments():
    assert find_cycle(import_graph()) is None


def test_experiments_import_neither_each_other_nor_the_runner():
    graph = import_graph()
    for mod, deps in graph.items():
        if not mod.startswith("experiments."):
            continue
        assert not {d for d in deps if d.startswith("experiments.")}, (mod, deps)
        assert not deps & FORBIDDEN_FOR_EXPERIMENTS, (mod, deps & FORBIDDEN_FOR_EXPERIMENTS)


def _experiment_modules() -> list[str]:
    return sorted(_module_name(p) for p in (ROOT / "experiments").glob("*.py") if p.name != "__init__.py")


# Every experiment, and the deadlock pair's child process (it imports no experiment), imported one after
# another in one fresh interpreter (one torch import instead of one per module): the first module whose
# import brings pytest in is named.
IMPORTS_WITHOUT_PYTEST = """
import importlib, sys
for mod in sys.argv[1:]:
    importlib.import_module(mod)
    if "pytest" in sys.modules:
        sys.exit(f"importing {mod} imported pytest")
"""


def test_experiments_import_without_pytest():
    mods = _experiment_modules() + ["suite.ops.p2p.deadlock_child"]
    assert len(mods) > 5 and "experiments.collectives" in mods
    proc = subprocess.run(
        [sys.executable, "-c", IMPORTS_WITHOUT_PYTEST, *mods], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_import_check_names_a_module_that_imports_pytest(tmp_path):
    (tmp_path / "uses_pytest.py").write_text("import pytest\n")
    proc = subprocess.run(
        [sys.executable, "-c", IMPORTS_WITHOUT_PYTEST, "json", "uses_pytest", "csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "importing uses_pytest imported pytest" in proc.stderr, proc.stderr


def test_no_experiment_holds_the_measurement_sequence():
    for p in (ROOT / "experiments").glob("*.py"):
        text = p.read_text()
        for needle in ("make_record(", "submit(", "measure("):
            assert needle not in text, f"{p.name} calls {needle}"


def _experiment_names() -> set[str]:
    """Every experiment's name: a module experiments/<name>.py or a folder experiments/<name>/."""
    exp = ROOT / "experiments"
    return {p.stem for p in exp.glob("*.py") if p.name != "__init__.py"} | {
        p.name for p in exp.iterdir() if (p / "__init__.py").is_file()
    }


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions, and of the attribute docstrings
    that follow an assignment."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            is_doc = i == 0 or isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))
            if is_doc and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.add(id(stmt.value))
    return out


def experiment_names_in(path: Path, names: set[str], root: Path = ROOT) -> list[str]:
    """``file:line name`` of every string constant of ``path`` (docstrings aside) equal to one of ``names``."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
    ]


def test_the_shared_workloads_name_no_experiment():
    # R1 for suite/ops/ (review_structure_2 §5.2): the experiment that declares a workload's cases passes
    # its name (collective_cases(..., experiment=), p2p.cases(..., experiment=)).
    names = _experiment_names()
    assert {"p2p", "collectives", "doctor"} <= names
    found = [hit for p in sorted((ROOT / "suite" / "ops").rglob("*.py")) for hit in experiment_names_in(p, names)]
    assert found == []


def test_the_experiment_name_check_sees_a_constant_and_not_a_docstring(tmp_path):
    path = tmp_path / "workload.py"
    path.write_text('"""p2p"""\nX = 1\n"""p2p"""\n\n\ndef f():\n    """doctor"""\n    return {"p2p": 1}\n')
    assert experiment_names_in(path, {"p2p", "doctor"}, root=tmp_path) == ["workload.py:8 'p2p'"]
