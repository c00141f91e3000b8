"""The layers point one way: experiments import only suite's public case API, never the pytest
bridge, the harness or each other, and suite/ + experiments/ have no import circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments")
FORBIDDEN_FOR_EXPERIMENTS = {"suite.plugin", "suite.runner", "suite.results", "suite.bench_adapter"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
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
    return graph


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


# every experiment, and the deadlock pair's child process (it imports no experiment)
@pytest.mark.parametrize("mod", _experiment_modules() + ["suite.deadlock"])
def test_experiment_imports_without_pytest(mod):
    code = f"import sys, {mod}; assert 'pytest' not in sys.modules, 'pytest was imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_no_experiment_holds_the_measurement_sequence():
    for p in (ROOT / "experiments").glob("*.py"):
        text = p.read_text()
        for needle in ("make_record(", "submit(", "measure("):
            assert needle not in text, f"{p.name} calls {needle}"
