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
