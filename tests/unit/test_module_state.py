"""Rule R7 of the layout: no module-level mutable state in suite/. One process runs many cases (a rank runs
every case of its run; the unit tier runs whole sessions in its own process), and state kept at module level
would carry from one to the next unseen.

State lives in what owns it: the process group's context (suite/harness/dist.py ``DistContext``, owned by the
plugin's session fixture), the plugin's ``RunState`` (one ``StashKey``), the journal on the ops it wraps.
Checked on the syntax tree of every module under suite/: no function rebinds a module-level name
(``global``), none writes its module's namespace (``globals()[name] = v``, ``globals().update(...)``,
the same through ``vars()``: a name cache is state too), and no function mutates a module-level list,
dict, set or other container (a method such as ``append`` or ``update``, an item assignment or
deletion), in its own module or through an import (``failures.BEFORE_RECORD.append``). Filling a table
at import time, at the module's top level, is not state. ``ALLOWED`` lists the exceptions with the
reason each has; it only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ALLOWED = {
    ("suite/harness/verify.py", "_memo"): "a bounded cache of a pure function's results (functools.lru_cache, "
    "bounded by bytes): the same key gives the same values with or without it",
    ("suite/harness/verify.py", "_memo_held"): "the bytes that cache holds",
}

CONTAINERS = {"list", "dict", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque", "fromkeys"}
MUTATORS = {
    "append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add",
    "discard", "appendleft", "extendleft", "move_to_end", "sort", "reverse",
}  # fmt: skip


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in CONTAINERS
    return False


def _top_level(tree: ast.Module) -> dict[str, bool]:
    """Each name the module binds at its top level -> whether its value is a container."""
    out = {}
    for stmt in tree.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = out.get(t.id, False) or _is_container(stmt.value)
    return out


def _referent(node: ast.expr) -> tuple[str | None, str] | None:
    """(module alias or None, name) for ``name`` and ``alias.name``."""
    if isinstance(node, ast.Name):
        return None, node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


NAMESPACES = {"globals", "vars"}


def _is_namespace(node: ast.expr | None) -> bool:
    """``globals()`` or ``vars()`` (no argument: the module's own namespace)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in NAMESPACES
        and not node.args
        and not node.keywords
    )


def _function_bodies(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node


def module_state(sources: dict[str, str]) -> list[tuple[str, str, int, str]]:
    """(module path, name, line, how) for each module-level name a function rebinds or mutates."""
    trees = {path: ast.parse(src) for path, src in sources.items()}
    containers = {path: {n for n, c in _top_level(t).items() if c} for path, t in trees.items()}
    by_stem = {Path(p).stem: p for p in trees}
    out = []
    for path, tree in trees.items():
        top = _top_level(tree)
        for fn in _function_bodies(tree):
            for node in ast.walk(fn):
                if isinstance(node, ast.Global):
                    out += [(path, n, node.lineno, "rebound via global") for n in node.names if n in top]
                    continue
                mutated = None
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                    mutated = node.func.value
                elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                    mutated = next((t.value for t in targets if isinstance(t, ast.Subscript)), None)
                if _is_namespace(mutated):
                    out.append((path, "globals()", node.lineno, "namespace written"))
                    continue
                ref = _referent(mutated) if mutated is not None else None
                if ref is None:
                    continue
                alias, name = ref
                owner = path if alias is None else by_stem.get(alias)
                if owner is not None and name in containers.get(owner, ()):
                    out.append((owner, name, node.lineno, f"mutated in {path}"))
    return sorted(set(out))


def _suite_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "suite").rglob("*.py"))}


def test_no_module_level_mutable_state_in_suite():
    found = [f for f in module_state(_suite_sources()) if (f[0], f[1]) not in ALLOWED]
    assert not found, "module-level state (keep it in its owner's object; rule R7): " + "; ".join(
        f"{p}: {n} {how} (line {line})" for p, n, line, how in found
    )


def test_the_allow_list_names_only_state_that_exists():
    seen = {(p, n) for p, n, _, _ in module_state(_suite_sources())}
    assert set(ALLOWED) <= seen, set(ALLOWED) - seen


def test_the_state_check_sees_rebinding_and_mutation_and_passes_tables():
    sources = {
        "suite/a.py": (
            "_CTX = None\n_HOOKS = []\n_TABLE = {}\n_TABLE['x'] = 1\nNAMES = ('a',)\n"
            "def start():\n    global _CTX\n    _CTX = 1\n"
            "def read():\n    return _TABLE.get('x'), NAMES\n"
        ),
        "suite/b.py": "from suite import a\ndef hook(f):\n    a._HOOKS.append(f)\n",
        "suite/c.py": "_CACHE = dict()\ndef put(k, v):\n    _CACHE[k] = v\ndef drop(k):\n    del _CACHE[k]\n",
        "suite/d.py": (
            "import importlib\ndef __getattr__(name):\n    value = importlib.import_module(name)\n"
            "    globals()[name] = value\n    return value\n"
            "def more(d):\n    globals().update(d)\n    vars().setdefault('x', 1)\n"
            "def local(d):\n    d[1] = 2\n    return globals().get('x')\n"
        ),
    }
    assert module_state(sources) == [
        ("suite/a.py", "_CTX", 7, "rebound via global"),
        ("suite/a.py", "_HOOKS", 3, "mutated in suite/b.py"),
        ("suite/c.py", "_CACHE", 3, "mutated in suite/c.py"),
        ("suite/c.py", "_CACHE", 5, "mutated in suite/c.py"),
        ("suite/d.py", "globals()", 4, "namespace written"),
        ("suite/d.py", "globals()", 7, "namespace written"),
        ("suite/d.py", "globals()", 8, "namespace written"),
    ]


def config_attributes(source: str) -> list[int]:
    """Lines that store an attribute on pytest's config object (``config.x = ...``, ``item.config.x = ...``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if name == "config":
                out.append(node.lineno)
    return out


def test_the_plugin_keeps_its_state_in_its_stash_not_on_pytests_config():
    found = {p: lines for p, src in _suite_sources().items() if (lines := config_attributes(src))}
    assert not found, f"attributes set on pytest's config (use the plugin's RunState): {found}"
    assert config_attributes("config._suite_rank = 0\nitem.config.x = 1\nst.rank = config.rank\n") == [1, 2]
