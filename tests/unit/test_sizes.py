"""Rule R5 of the layout: modules of at most 400 lines with one concern, functions of at most 80, so that a
reader takes in a module at one sitting and a function on one screen, and a change touches one concern. What
is over today is listed below with its size and what would split it: a ratchet, not a waiver. A listed module
or function may shrink but not grow, and one back under the limit must leave the list (the test says so), so
the list only gets shorter."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE_LINES = 400
FUNCTION_LINES = 80

OVER_MODULES: dict = {}
"""Module -> (its lines today, the split that would bring it under MODULE_LINES)."""

OVER_FUNCTIONS = {}
"""'module:function' -> (its lines today, what would split it under FUNCTION_LINES)."""


def sizes(sources: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Lines of each module, and of each function (``path:name``; the longest of a name's definitions)."""
    modules, functions = {}, {}
    for path, src in sources.items():
        modules[path] = len(src.splitlines())
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{path}:{node.name}"
                functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
    return modules, functions


def size_violations(sources: dict[str, str], over_modules: dict, over_functions: dict) -> list[str]:
    modules, functions = sizes(sources)
    out = []
    for found, limit, listed, what in (
        (modules, MODULE_LINES, over_modules, "module"),
        (functions, FUNCTION_LINES, over_functions, "function"),
    ):
        for name, n in sorted(found.items()):
            cap = listed.get(name, (limit, ""))[0]
            if n > cap:
                out.append(
                    f"{what} {name}: {n} lines > {cap}"
                    + (" (listed: split it, do not grow it)" if name in listed else "")
                )
        for name, (cap, _) in sorted(listed.items()):
            if found.get(name, 0) <= limit:
                out.append(f"{what} {name}: {found.get(name, 0)} lines, within {limit}: take it off the list")
            elif found[name] < cap:
                out.append(f"{what} {name}: {found[name]} lines < the listed {cap}: lower its entry (the ratchet)")
    return out


def test_modules_and_functions_stay_within_their_sizes():
    sources = {
        p.relative_to(ROOT).as_posix(): p.read_text()
        for pkg in ("suite", "experiments")
        for p in sorted((ROOT / pkg).rglob("*.py"))
    }
    assert size_violations(sources, OVER_MODULES, OVER_FUNCTIONS) == []


def test_the_size_check_names_growth_new_debt_and_stale_entries():
    def f(n: int) -> str:
        return "def f():\n" + "    x = 1\n" * (n - 1)

    sources = {"a.py": f(90), "b.py": f(10), "c.py": f(70) + "\n" * 400}
    found = size_violations(sources, {"c.py": (480, "")}, {"b.py:f": (85, ""), "c.py:f": (60, "")})
    assert found == [
        "module c.py: 470 lines < the listed 480: lower its entry (the ratchet)",
        "function a.py:f: 90 lines > 80",
        "function c.py:f: 70 lines > 60 (listed: split it, do not grow it)",
        "function b.py:f: 10 lines, within 80: take it off the list",
        "function c.py:f: 70 lines, within 80: take it off the list",
    ], found
