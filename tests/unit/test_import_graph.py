"""The layers point one way: experiments import the core only through suite.api (rule R2), never the
pytest bridge, the harness or each other; suite/model/ reads stored JSON only (no torch, no harness);
suite/ + experiments/ have no import circle, and neither have suite's packages (its roles and shared modules)."""

from __future__ import annotations

import ast
import re
import functools
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments")
FORBIDDEN_FOR_EXPERIMENTS = {
    "suite.harness.pytest.plugin",
    "suite.harness.pytest.run_state",
    "suite.harness.pytest.results_file",
    "suite.harness.pytest.rank_output",
    "suite.harness.pytest.failure_notes",
    "suite.harness.runner",
    "suite.results",
    "suite.harness.pytest.bench_adapter",
}
OFFLINE_FILES = {"verdict", "report", "model"}
"""An experiment's modules that read a stored run (never on a rank) may use suite.results' readers."""


@functools.cache
def _parse(text: str) -> ast.Module:
    """A module's syntax tree, parsed once a session: most tests here walk every module of suite/ and experiments/
    (read only)."""
    return ast.parse(text)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _absolute(mod: str, path: Path, node: ast.ImportFrom) -> str:
    """The module an ``from X import`` names, relative ones (``from . import table``) resolved."""
    if node.level == 0:
        return node.module
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


@functools.cache  # parsing every module takes a while; two tests read the graph
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports (top level and inside functions alike)."""
    mods = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(_parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
                base = _absolute(mod, path, node)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
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


def test_relative_imports_count_as_edges():
    graph = import_graph()
    assert "experiments.doctor.verdict" in graph["experiments.doctor.report"]  # from . import verdict
    assert "experiments.ddp.settings" in graph["experiments.ddp"]  # from .settings import DdpSettings


def test_experiments_import_neither_each_other_nor_the_runner():
    graph = import_graph()
    for mod, deps in graph.items():
        if not mod.startswith("experiments."):
            continue
        folder = ".".join(mod.split(".")[:2])  # experiments.<name>: its own folder's modules are its own
        others = {d for d in deps if d.startswith("experiments") and d != folder and not d.startswith(folder + ".")}
        assert not others, (mod, others)
        offline = mod.rsplit(".", 1)[-1] in OFFLINE_FILES
        forbidden = FORBIDDEN_FOR_EXPERIMENTS - ({"suite.results"} if offline else set())
        assert not deps & forbidden, (mod, deps & forbidden)


def _experiment_modules() -> list[str]:
    return sorted(_module_name(p) for p in (ROOT / "experiments").glob("*/*.py"))


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
    assert len(mods) > 5 and "experiments.collectives.cases" in mods
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
    for p in (ROOT / "experiments").rglob("*.py"):
        text = p.read_text()
        for needle in ("make_record(", "submit(", "measure("):
            assert needle not in text, f"{p.name} calls {needle}"


# --- rule R1: the core names no experiment (an experiment comes and goes as its own folder) -----------

R1_HOMONYMS = {
    "suite/model/document.py 'p2p'": "predict.json's point-to-point link fits (its key since the first "
    "predict.json), not the p2p experiment",
}
"""A core constant spelled like an experiment that means something else, each with what it means."""


def test_the_core_names_no_experiment():
    from suite import registry

    names = set(registry.discover())
    assert {"collectives", "doctor"} <= names
    hits = [
        hit
        for p in sorted((ROOT / "suite").rglob("*.py"))
        for hit in experiment_names_in(p, names)
        if re.sub(r":\d+ ", " ", hit, count=1) not in R1_HOMONYMS
    ]
    assert not hits, "the core names an experiment (give the experiment's spec a hook instead): " + "; ".join(hits)


def test_only_the_registry_imports_experiments():
    graph = import_graph()
    importers = sorted(
        m for m, deps in graph.items() if m.startswith("suite") and any(d.startswith("experiments") for d in deps)
    )
    assert importers == [], importers
    for p in sorted((ROOT / "suite").rglob("*.py")):
        if p.name == "registry.py" and p.parent.name == "suite":
            continue
        tree = _parse(p.read_text())
        docs = _docstrings(tree)
        spelled = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            if n.value.split(".")[0] == "experiments"
        ]
        assert not spelled, f"{p.relative_to(ROOT)} reaches experiments by name: {spelled}"


# --- rule R2 (first half): an experiment is a folder with a SPEC named as the folder ---------------


def test_every_experiment_folder_has_its_spec_and_cases():
    from suite import registry

    folders = sorted(p.name for p in (ROOT / "experiments").iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert folders == sorted(registry.discover()), "a folder under experiments/ without __init__.py"
    assert not [p.name for p in (ROOT / "experiments").glob("*.py") if p.name != "__init__.py"], "a loose module"
    for name, spec in registry.discover().items():
        assert spec.name == name and (ROOT / "experiments" / name / "cases.py").is_file(), name


# --- rule R2 (second half): experiments reach the core through suite.api only ---------------------
#
# Checked on each folder's source, so the same function runs over a planted tree below:
# - __init__.py binds SPEC = ExperimentSpec(name=<the folder's name>, ...);
# - every import of the core is `from suite.api import ...` (suite.api re-exports what experiments use),
#   except that an experiment's offline step model (model.py) builds on the models' package, suite.model;
# - cases.py imports no torch.distributed (its builders are in workload.py: declaring the cases needs no group);
# - no experiment imports another (by name, or relatively from above its folder).

R2_IN_FLIGHT: dict[str, str] = {}
"""Temporary: folders other engineers are editing this round, exempt from the import rules (their SPEC and
the no-cross-import rule still hold); each with why. This list only shrinks."""


def _imports(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line, module, relative level) of every import statement (``from a import b`` also names a.b)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            out += [(node.lineno, base, node.level)]
            out += [(node.lineno, f"{base}.{a.name}" if base else a.name, node.level) for a in node.names]
    return out


def _spec_name(init: Path) -> str | None:
    """The ``name=`` constant of ``SPEC = ExperimentSpec(...)`` in ``init``, or None."""
    for node in _parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets):
            call = node.value
            if isinstance(call, ast.Call) and ast.unparse(call.func).split(".")[-1] == "ExperimentSpec":
                for kw in call.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        return kw.value.value
    return None


def r2_violations(root: Path, in_flight: dict[str, str] | None = None) -> list[str]:
    """'folder/file:line what' for each breach of rule R2 in the experiment folders under ``root``; the
    import rules skip the folders of ``in_flight``."""
    in_flight = in_flight or {}
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        init = folder / "__init__.py"
        if not init.is_file() or _spec_name(init) != folder.name:
            out.append(f"{folder.name}/__init__.py: no SPEC = ExperimentSpec(name={folder.name!r}, ...)")
        for path in sorted(folder.rglob("*.py")):
            where = path.relative_to(root).as_posix()
            inside = len(path.relative_to(folder).parts)  # a relative import may climb to the folder, not above it
            tree = _parse(path.read_text())
            out += [
                f"{where}:{line} names another experiment's module ({name!r})"
                for line, name in _named(tree, root, folder)
            ]
            for line, mod, level in _imports(tree):
                top = mod.split(".")
                if (level == 0 and top[0] == root.name and top[1:2] not in ([], [folder.name])) or level > inside:
                    out.append(f"{where}:{line} imports another experiment ({'.' * level}{mod})")
                if folder.name in in_flight or level:
                    continue
                public = ("suite.api", "suite.model") if path.name == "model.py" else ("suite.api",)
                if top[0] == "suite" and not any(mod == p or mod.startswith(p + ".") for p in public):
                    out.append(f"{where}:{line} imports {mod} (the core is reached through suite.api)")
                if path.name == "cases.py" and (mod == "torch.distributed" or mod.startswith("torch.distributed.")):
                    out.append(f"{where}:{line} imports {mod} (cases.py declares; its builders go in workload.py)")
    return out


def _named(tree: ast.AST, root: Path, folder: Path) -> list[tuple[int, str]]:
    """(line, text) of each string constant, docstrings aside, that names a module of another experiment
    (``importlib.import_module("experiments.other.models")``: an import by name is an import)."""
    docs = _docstrings(tree)
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
        if n.value.split(".")[0] == root.name and n.value.split(".")[1:2] not in ([], [folder.name])
    ]


def test_experiments_follow_rule_r2():
    assert r2_violations(ROOT / "experiments", R2_IN_FLIGHT) == []


def test_the_in_flight_list_only_names_folders_that_still_need_it():
    for name, why in R2_IN_FLIGHT.items():
        assert (ROOT / "experiments" / name).is_dir() and why, name
        # converted? then take it off the list, so that the rule holds for it too
        assert r2_violations(ROOT / "experiments") != r2_violations(ROOT / "experiments", {name: why}), name


def test_the_example_follows_rule_r2():
    assert r2_violations(ROOT / "examples") == []


PLANTED = {
    "good/__init__.py": 'from suite.api import ExperimentSpec\nSPEC = ExperimentSpec(name="good", cases=None)\n',
    "good/cases.py": "import torch\nfrom suite.api import Case\nfrom . import workload\nfrom .workload import f\n",
    "good/workload.py": "import torch.distributed as dist\nfrom suite.api import Buffers, groups\n",
    "good/model.py": "from suite.model.links import Topology\nfrom suite.model.step import StepModel\n",
    "bad/derived.py": "from suite.model import fit\n",
    "bad/loader.py": 'import importlib\nM = importlib.import_module("experiments.good.models:mlp")\n'
    'S = "experiments.bad.x"\n',  # its own folder's module, by name: allowed
    "bad/__init__.py": 'from suite.case import ExperimentSpec\nSPEC = ExperimentSpec(name="wrong")\n',
    "bad/cases.py": "import torch.distributed as dist\nfrom suite.api import Case\n"
    "from torch.distributed import ReduceOp\n",
    "bad/workload.py": "from experiments.good import cases\nfrom ..good import workload\nimport suite.harness.dist\n"
    "def f():\n    from suite.ops import collectives\n",
    "good/parts/one.py": "from ..workload import f\nfrom . import two\n",  # a package inside the folder
    "bad/parts/one.py": "from ...good import cases\n",
    "busy/__init__.py": 'from suite.case import ExperimentSpec\nSPEC = ExperimentSpec(name="busy")\n',
    "busy/cases.py": "import torch.distributed as dist\nfrom experiments.bad import cases\n",
}


def test_the_r2_check_names_each_planted_breach(tmp_path):
    root = tmp_path / "experiments"
    for rel, text in PLANTED.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "nospec").mkdir()
    (root / "nospec" / "cases.py").write_text("")
    found = r2_violations(root, {"busy": "in flight"})
    assert found == [
        "bad/__init__.py: no SPEC = ExperimentSpec(name='bad', ...)",
        "bad/__init__.py:1 imports suite.case (the core is reached through suite.api)",
        "bad/__init__.py:1 imports suite.case.ExperimentSpec (the core is reached through suite.api)",
        "bad/cases.py:1 imports torch.distributed (cases.py declares; its builders go in workload.py)",
        "bad/cases.py:3 imports torch.distributed (cases.py declares; its builders go in workload.py)",
        "bad/cases.py:3 imports torch.distributed.ReduceOp (cases.py declares; its builders go in workload.py)",
        "bad/derived.py:1 imports suite.model (the core is reached through suite.api)",
        "bad/derived.py:1 imports suite.model.fit (the core is reached through suite.api)",
        "bad/loader.py:2 names another experiment's module ('experiments.good.models:mlp')",
        "bad/parts/one.py:1 imports another experiment (...good)",
        "bad/parts/one.py:1 imports another experiment (...good.cases)",
        "bad/workload.py:1 imports another experiment (experiments.good)",
        "bad/workload.py:1 imports another experiment (experiments.good.cases)",
        "bad/workload.py:2 imports another experiment (..good)",
        "bad/workload.py:2 imports another experiment (..good.workload)",
        "bad/workload.py:3 imports suite.harness.dist (the core is reached through suite.api)",
        "bad/workload.py:5 imports suite.ops (the core is reached through suite.api)",
        "bad/workload.py:5 imports suite.ops.collectives (the core is reached through suite.api)",
        "busy/cases.py:2 imports another experiment (experiments.bad)",
        "busy/cases.py:2 imports another experiment (experiments.bad.cases)",
        "nospec/__init__.py: no SPEC = ExperimentSpec(name='nospec', ...)",
    ], found


def test_suite_api_exports_no_harness_internals():
    from suite import api

    homes = set(api.HOMES.values())
    assert not homes & (FORBIDDEN_FOR_EXPERIMENTS - {"suite.results"}), homes & FORBIDDEN_FOR_EXPERIMENTS
    # from the record module only its readers of a stored run (an experiment's offline report and verdict)
    assert {n for n, h in api.HOMES.items() if h == "suite.results"} == {"load_run", "records"}


# Rule R3's last bullet: the offline models read stored JSON only (make predict runs anywhere). Nothing
# suite/model/ reaches through its imports -- the graph below follows imports at any depth, skipping
# `if TYPE_CHECKING:` blocks, which never run -- imports torch or pytest or is a module of the harness.
# suite.case (ExperimentSpec, the Case protocol: stdlib and suite.errors only) and suite.registry are not
# the harness: the models find the experiments' step models and link sources through the specs. What a
# spec's hooks import when resolved is what the run-time check below sees.
MODEL_PACKAGE = "suite.model"
HARNESS = {
    "suite.harness.runner",
    "suite.harness.pytest.plugin",
    "suite.harness.dist",
    "suite.harness.timing",
    "suite.harness.pytest.bench_adapter",
    "suite.harness.journal",
    "suite.harness.journal.wrap",
    "suite.harness.journal.check",
    "suite.harness.journal.dump",
    "suite.ops.p2p.deadlock",
    "suite.launch.cli",
    "suite.launch.supervise",
    "suite.launch.preflight",
}
OFFLINE_FORBIDDEN_EXTERNAL = ("torch", "pytest")


def _runtime_imports(tree: ast.AST) -> list[str]:
    """Every module name an import statement of ``tree`` names (``from a import b`` names a and a.b),
    leaving out the bodies of ``if TYPE_CHECKING:``."""
    out: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        stack.extend(ast.iter_child_nodes(node))
    return out


def offline_violations(sources: dict[str, str], roots: str) -> list[str]:
    """'a -> b -> c: why' for each module reachable from a module under ``roots`` (by runtime imports among
    ``sources``, module name -> its text) that is a harness module or imports torch or pytest."""
    imports = {m: _runtime_imports(_parse(text)) for m, text in sources.items()}
    out = []
    for root in sorted(m for m in sources if m == roots or m.startswith(roots + ".")):
        seen, queue = {root: [root]}, [root]
        while queue:
            mod = queue.pop(0)
            path = " -> ".join(seen[mod])
            if mod in HARNESS or mod.startswith("suite.harness"):
                out.append(f"{path}: a harness module")
            bad = sorted({n for n in imports[mod] if n.split(".")[0] in OFFLINE_FORBIDDEN_EXTERNAL})
            if bad:
                out.append(f"{path}: imports {', '.join(bad)}")
            for n in imports[mod]:
                if n in sources and n not in seen:
                    seen[n] = seen[mod] + [n]
                    queue.append(n)
    return out


def test_the_offline_packages_import_neither_torch_nor_the_harness():
    mods = {_module_name(p): p.read_text() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    for package in (MODEL_PACKAGE, "suite.report"):
        assert len([m for m in mods if m.startswith(package + ".")]) > 5, package
        assert offline_violations(mods, package) == [], package
    # the readers of a run's folder (suite/postmortem/): files only, whether the ranks are gone or hung
    assert {"suite.postmortem.hang", "suite.postmortem.trace"} <= set(mods)
    assert offline_violations(mods, "suite.postmortem") == []


# --- rule R3, the roles: `ls suite/` says where each module runs ---------------------------------------

ROLES = ("harness", "ops", "system", "launch", "postmortem", "deploy", "common", "report", "model", "inject", "watch")
SHARED = {"__init__", "api", "case", "errors", "measurement", "metrics", "op_table", "registry", "results"}
"""The modules at the top of suite/: the ones every role shares (suite/__init__.py says what each is)."""
APART = {
    "suite.launch": ("suite.harness",),
    "suite.harness": ("suite.launch",),
    "suite.common": ("suite.launch", "suite.harness"),
    "suite.postmortem": ("suite.launch", "suite.harness"),
    "suite.deploy": ("suite.harness",),
    "suite.inject": ("suite.launch", "suite.harness"),
    "suite.watch": ("suite.launch",),
}
"""Package -> the packages it must not import: the host side runs no rank's code and the ranks none of the host's;
what both use is suite/common/, which imports neither. The readers of a run's folder (suite/postmortem/) read its
files, and nothing of the code that wrote them; a deployment's manifests (suite/deploy/) are the launcher's
command, rendered, and run no rank's code."""


def role_violations(graph: dict[str, frozenset[str]], apart: dict[str, tuple[str, ...]] = APART) -> list[str]:
    """'a -> b' for each import across a line ``apart`` draws (either direction between the launcher and the
    harness, or out of their shared package), and each module at the top of suite/ that is not a shared one (a new
    module takes a role: a subpackage)."""
    out = []
    for mod, deps in sorted(graph.items()):
        parts = mod.split(".")
        if parts[0] == "suite" and len(parts) == 2 and parts[1] not in ROLES and parts[1] not in SHARED:
            out.append(f"{mod}: a module at the top of suite/ that no role owns")
        for package, banned in apart.items():
            if mod == package or mod.startswith(package + "."):
                out += [f"{mod} -> {d}" for d in sorted(deps) if any(d == b or d.startswith(b + ".") for b in banned)]
    return out


def test_each_module_of_the_core_has_a_role_and_launcher_and_ranks_share_only_common():
    graph = import_graph()
    assert {f"suite.{r}" for r in ROLES} <= set(graph)
    assert role_violations(graph) == []


def test_the_role_check_names_a_stray_module_and_an_import_across_either_line():
    graph = {
        "suite.helpers": frozenset(),
        "suite.metrics": frozenset(),
        "suite.launch.cli": frozenset({"suite.harness.dist", "suite.common.progress", "suite.common.config"}),
        "suite.harness.dist": frozenset({"suite.common.config", "suite.launch.preflight"}),
        "suite.common.config": frozenset({"suite.errors", "suite.harness"}),
        "suite.postmortem.hang": frozenset({"suite.common.journal_ring", "suite.launch.supervise"}),
        "suite.deploy.k8s.cli": frozenset({"suite.launch.cli", "suite.harness.dist"}),
    }
    assert role_violations(graph) == [
        "suite.common.config -> suite.harness",
        "suite.deploy.k8s.cli -> suite.harness.dist",
        "suite.harness.dist -> suite.launch.preflight",
        "suite.helpers: a module at the top of suite/ that no role owns",
        "suite.launch.cli -> suite.harness.dist",
        "suite.postmortem.hang -> suite.launch.supervise",
    ]


def test_the_offline_check_names_the_path_to_torch_and_to_the_harness():
    mods = {
        "suite.model": "",
        "suite.model.a": "from suite import results\nfrom suite.model import b\n",
        "suite.model.b": "def f():\n    from suite.harness.runner import run\n",
        "suite.results": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from suite.harness.timing import M\n"
        ),
        "suite.harness.runner": "import torch.distributed as dist\n",
        "suite.harness.timing": "import torch\n",
    }
    found = offline_violations(mods, "suite.model")
    assert "suite.model.a -> suite.model.b -> suite.harness.runner: imports torch.distributed" in found, found
    assert "suite.model.b -> suite.harness.runner: a harness module" in found, found
    assert not [f for f in found if "suite.harness.timing" in f], found  # a TYPE_CHECKING import never runs


# --- the package graph: suite's packages import one another one way ------------------------------------


def package_of(mod: str) -> str:
    """The package node of ``mod``: its role (``suite.<role>``, its subpackages such as harness/journal/ folded in:
    a folder inside a role is that role's business), or the module itself at the top of suite/ (each shared module
    is a layer of its own)."""
    return ".".join(mod.split(".")[:2])


def package_graph(graph: dict[str, frozenset[str]], root: str = "suite") -> dict[str, dict[str, list[str]]]:
    """Package -> the packages it imports under ``root`` -> 'a -> b', each module import that makes that edge."""
    out: dict[str, dict[str, list[str]]] = {}
    for mod, deps in sorted(graph.items()):
        if mod.split(".")[0] != root:
            continue
        a = package_of(mod)
        out.setdefault(a, {})
        for d in sorted(deps):
            b = package_of(d)
            if d.split(".")[0] == root and b != a:
                out[a].setdefault(b, []).append(f"{mod} -> {d}")
    return out


def package_cycle(graph: dict[str, frozenset[str]]) -> str | None:
    """One circle of suite's package graph, each step with the imports that make it; None when it has none."""
    packages = package_graph(graph)
    cycle = find_cycle({p: set(deps) for p, deps in packages.items()})
    if cycle is None:
        return None
    steps = [f"{a} -> {b} ({'; '.join(packages[a][b])})" for a, b in zip(cycle, cycle[1:])]
    return "the packages of suite/ import one another in a circle: " + ", then ".join(steps)


def test_the_package_graph_of_suite_is_acyclic():
    graph = import_graph()
    assert {"suite.harness", "suite.report", "suite.results", "suite.case"} <= set(package_graph(graph))
    assert package_cycle(graph) is None, package_cycle(graph)


def test_the_package_check_names_the_circle_and_the_imports_that_make_it():
    graph = {
        "suite.results": frozenset({"suite.harness.timing"}),
        "suite.harness": frozenset(),
        "suite.harness.timing": frozenset({"suite.metrics"}),
        "suite.harness.pytest.plugin": frozenset({"suite.results", "suite.harness.timing"}),
        "suite.report": frozenset(),
        "suite.report.compare": frozenset({"suite.report.compare.text"}),
        "suite.report.compare.text": frozenset({"suite.results", "suite.report.cli"}),
        "suite.report.cli": frozenset({"suite.report.compare", "suite.results"}),
        "suite.metrics": frozenset(),
    }
    assert [package_of(m) for m in ("suite.report.compare.text", "suite.report", "suite.results")] == [
        "suite.report",
        "suite.report",
        "suite.results",
    ]
    assert package_cycle(graph) == (
        "the packages of suite/ import one another in a circle: suite.harness -> suite.results "
        "(suite.harness.pytest.plugin -> suite.results), then suite.results -> suite.harness (suite.results -> "
        "suite.harness.timing)"
    )
    graph["suite.results"] = frozenset({"suite.metrics"})
    assert package_cycle(graph) is None


# The same at run time: the two commands of python -m suite.model, on the committed fixture, in a fresh
# interpreter, load no torch and no harness module (function-level imports included).
MODEL_COMMANDS_WITHOUT_TORCH = """
import shutil, sys, tempfile
from pathlib import Path
from suite.model import cli
run = Path(tempfile.mkdtemp()) / "run"
shutil.copytree(sys.argv[1], run)
assert cli.main(["predict", str(run), "--ranks", "16", "--ranks-per-node", "4"]) == 0
assert cli.main(["validate", "--fit", str(run), "--check", str(run)]) == 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "pytest") or m in set(sys.argv[2:]))
sys.exit(f"python -m suite.model loaded {loaded}" if loaded else 0)
"""


def test_the_model_commands_load_neither_torch_nor_the_harness():
    fixture = ROOT / "tests" / "fixtures" / "collectives-gloo-2"
    proc = subprocess.run(
        [sys.executable, "-c", MODEL_COMMANDS_WITHOUT_TORCH, str(fixture), *sorted(HARNESS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# And the reports: tables, CSV, the HTML report and a comparison of the committed fixture, in a fresh
# interpreter, load no torch and no module of the harness or of the ranks' workloads (the experiments'
# tables and report hooks included: they read what the records say).
REPORT_COMMANDS_WITHOUT_TORCH = """
import contextlib, io, shutil, sys, tempfile
from pathlib import Path
from suite.report import cli
run = Path(tempfile.mkdtemp()) / "run"
shutil.copytree(sys.argv[1], run)
with contextlib.redirect_stdout(io.StringIO()):
    for argv in ([str(run)], ["csv", str(run)], ["html", str(run)]):
        assert cli.main(argv) == 0, argv
    cli.main(["compare", str(run), str(run)])  # its status: the gate (one run a side cannot judge); read only
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "pytest") or m.startswith(("suite.harness",
          "suite.ops")))
sys.exit(f"python -m suite.report loaded {loaded[:10]}" if loaded else 0)
"""


def test_the_report_commands_load_neither_torch_nor_the_harness():
    fixture = ROOT / "tests" / "fixtures" / "all-gloo-2"
    proc = subprocess.run(
        [sys.executable, "-c", REPORT_COMMANDS_WITHOUT_TORCH, str(fixture)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


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
    tree = _parse(path.read_text())
    docs = _docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
    ]


def test_the_shared_workloads_name_no_experiment():
    # R1 for suite/ops/ (a shared workload serves any experiment): the experiment that declares its cases passes
    # its name (collective_cases(..., experiment=), p2p.cases(..., experiment=)).
    names = _experiment_names()
    assert {"p2p", "collectives", "doctor"} <= names
    found = [hit for p in sorted((ROOT / "suite" / "ops").rglob("*.py")) for hit in experiment_names_in(p, names)]
    assert found == []


def test_the_experiment_name_check_sees_a_constant_and_not_a_docstring(tmp_path):
    path = tmp_path / "workload.py"
    path.write_text('"""p2p"""\nX = 1\n"""p2p"""\n\n\ndef f():\n    """doctor"""\n    return {"p2p": 1}\n')
    assert experiment_names_in(path, {"p2p", "doctor"}, root=tmp_path) == ["workload.py:8 'p2p'"]
