"""The op table (suite/op_table.py) is the one list of ops: complete against what the suite times (a), the only
place the core spells a list of op names (b), and each of its columns in step with the module that reads it (c).
A ring file an older run wrote still reads: a row keeps its journal code."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from suite import metrics, op_table
from suite.common import journal_ring
from suite.harness.mpi import group as mpi_backend, watch as mpi_watch
from suite.harness.plant import mode as fault_mode
from suite.harness.journal import wrap
from suite.model import algorithms, backend_choice
from suite.ops import collectives

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(op_table.BY_NAME) | set(op_table.FAMILY)
"""The op vocabulary: every row's function and every family."""

# --- (a) complete against what is timed -----------------------------------------------------------------------

NOT_OPS = {
    "get_rank": "asks the rank, moves no data",
    "get_world_size": "asks the size, moves no data",
    "init_process_group": "makes the deadlock probe's group",
    "destroy_process_group": "ends the deadlock probe's group",
    "P2POp": "describes one isend or irecv (rows of the table) for batch_isend_irecv",
    "batch_isend_irecv": "issues P2POps: each is an isend or irecv row, and the journal records each",
    "broadcast_object_list": "shares the deadlock probe's answer once, before any case is timed",
}
"""torch.distributed functions the workloads call that are no row, each with why."""


def called_functions(source: str) -> set[str]:
    """Every ``dist.<name>(...)`` a module calls, and every variant it looks up with ``_function("<name>")``."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "dist":
            out.add(f.attr)
        elif isinstance(f, ast.Name) and f.id == "_function" and node.args and isinstance(node.args[0], ast.Constant):
            out.add(node.args[0].value)
    return out


def missing_rows(called: set[str], rows: set[str]) -> list[str]:
    """The functions called that have neither a row nor a reason to have none."""
    return sorted(called - rows - set(NOT_OPS))


def test_every_function_the_workloads_call_has_a_row():
    called = set().union(*(called_functions(p.read_text()) for p in (ROOT / "suite" / "ops").rglob("*.py")))
    assert {"all_reduce", "all_to_all_single", "isend", "irecv", "send", "recv", "batch_isend_irecv"} <= called
    assert missing_rows(called, set(op_table.BY_NAME)) == []
    assert set(NOT_OPS) <= called, "a reason left behind for a function no workload calls"


def test_every_registered_collective_is_a_row_of_its_family():
    for c in collectives.REGISTRY:
        row = op_table.BY_NAME.get(c.variant)
        assert row is not None, f"{c.variant}: a REGISTRY variant without a row in suite/op_table.py"
        assert row.family == c.op, (c.variant, row.family, c.op)


def test_the_completeness_rule_names_a_function_without_a_row():
    src = "def _b(a, ctx):\n    x = _function('all_gather_into_tensor')\n    dist.all_gather_object(a, b)\n"
    assert called_functions(src) == {"all_gather_into_tensor", "all_gather_object"}
    assert missing_rows(called_functions(src), set(op_table.BY_NAME)) == ["all_gather_object"]
    assert missing_rows({"send", "get_rank"}, {"recv"}) == ["send"]


# --- (b) no other list of op names in the core --------------------------------------------------------------

SELECTIONS = {
    "suite/ops/p2p/producer.py ['broadcast', 'scatter']": "the producer pattern's iterations, named after the "
    "collectives its p2p forms are compared with: a choice of variants, not the list of ops",
}
"""A literal collection of op names in the core that is not a vocabulary, each with why."""


def _names_in(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES]


def op_lists(source: str) -> list[str]:
    """'line N: [names]' for each literal tuple, list or set of two or more op names, and each dict keyed by two or
    more (a table of ops kept apart from the op table)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = _names_in(node)
        elif isinstance(node, ast.Dict):
            names = [n for k in node.keys if k is not None for n in _names_in(k)]
        if len(names) >= 2:
            found.append(f"line {node.lineno}: {sorted(names)}")
    return found


def test_no_module_of_the_core_spells_a_list_of_ops():
    found = {}
    for p in sorted((ROOT / "suite").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel == "suite/op_table.py":
            continue
        hits = [h for h in op_lists(p.read_text()) if f"{rel} {h.split(': ', 1)[1]}" not in SELECTIONS]
        if hits:
            found[rel] = hits
    assert found == {}, "read the op table (suite/op_table.py) instead of spelling the ops"


def test_each_selection_is_still_there_and_names_rows():
    for key in SELECTIONS:
        rel, names = key.split(" ", 1)
        assert any(h.endswith(names) for h in op_lists((ROOT / rel).read_text())), key
        assert set(ast.literal_eval(names)) <= NAMES, key


@pytest.mark.parametrize(
    "line",
    [
        'OPS = ("all_reduce", "broadcast", "all_gather")',  # journal_ring, algorithms
        'OPS = {"all_reduce": (2, 3, None), "barrier": (0, 1, None)}',  # the journal's wrappers
        'P2P = frozenset({"send", "recv", "isend", "irecv"})',  # the journal, the divergence reader
        'WATCHED = (("allreduce", "all_reduce"), ("reduce", "reduce"))',  # the MPI watchers
        'x = op in ("isend", "irecv")',
        'TABLE = {"all_reduce": 2.0, "all_gather": 1.0}',  # metrics, the models
    ],
)
def test_the_list_rule_catches_each_form_the_core_had(line):
    assert op_lists(line)


def test_the_list_rule_leaves_single_names_and_other_words_alone():
    assert op_lists('if op == "barrier": pass\nx = ("allreduce", "allgather")\nd = {"all_reduce": 1, "ring": 2}') == []


# --- (c) each column in step with its reader ------------------------------------------------------------------

OLD_RING_CODES = (
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_to_all",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "gather",
    "scatter",
    "all_to_all_single",
    "barrier",
    "send",
    "recv",
    "isend",
    "irecv",
    "send_object_list",
    "recv_object_list",
)
"""The ops by code, as ring files were written before the op table: a code never changes meaning."""


def test_journal_codes_are_unique_and_keep_their_numbers():
    codes = [op.code for op in op_table.OPS]
    assert len(set(codes)) == len(codes) and min(codes) >= 0
    assert {name: op_table.BY_NAME[name].code for name in OLD_RING_CODES} == {
        n: i for i, n in enumerate(OLD_RING_CODES)
    }


def test_a_ring_file_an_older_run_wrote_still_reads(tmp_path):
    # slots packed as the ring's writer packed them before the table: op code i is OLD_RING_CODES[i]
    path = tmp_path / "rank0.ring"
    ring = journal_ring.Ring(path, "vm", 0.0)
    ring.case("case-a")
    ring.map.close()
    raw = bytearray(path.read_bytes())
    for code in range(len(OLD_RING_CODES)):
        n = code + 1  # the write number, from 1: (n, seq, op, group, ndim, dims, dtype, peer, case, count, clock)
        slot = (n, n, code, 0, 1, 4, -1, -1, 0, 1, 1, 1, float(n))
        journal_ring.SLOT.pack_into(raw, journal_ring.OFFSET + n * journal_ring.SLOT.size, *slot)
    path.write_bytes(bytes(raw))
    dump = journal_ring.read(path, 0)
    assert [e["op"] for e in dump["tail"]] == list(OLD_RING_CODES)


def test_every_row_round_trips_through_a_ring_file(tmp_path):
    ring = journal_ring.Ring(tmp_path / "rank0.ring", "vm", 0.0)
    ring.case("case-a")
    for op in op_table.OPS:
        ring.put(op.name, "0", op.code, (4,), torch.float32, None, 1, float(op.code))
    ring.map.flush()
    raw = (tmp_path / "rank0.ring").read_bytes()
    fields = [journal_ring.SLOT.unpack_from(raw, journal_ring.OFFSET + i * journal_ring.SLOT.size) for i in range(64)]
    assert sorted(f[2] for f in fields if f[0] > 0) == sorted(op.code for op in op_table.OPS)
    assert [e["op"] for e in journal_ring.read(tmp_path / "rank0.ring", 0)["tail"]] == [o.name for o in op_table.OPS]
    ring.map.close()


@pytest.mark.parametrize("op", op_table.OPS, ids=lambda op: op.name)
def test_the_journal_finds_each_rows_arguments_where_torch_puts_them(op):
    fn = getattr(dist, op.name, None)
    assert fn is not None, f"torch.distributed has no {op.name}"
    params = list(inspect.signature(fn).parameters)
    assert params.index("group") == op.group_at
    assert op.async_at == (params.index("async_op") if "async_op" in params else None)
    assert op.peer is None or params[1] == op.peer
    assert not op.issues or op.async_at is None
    assert op.reduces == ("op" in params), "a reducing row (wrong_reduction applies) takes a reduce op"
    assert op.family in op_table.FAMILY
    assert op.renamed_to is None or op_table.BY_NAME[op.renamed_to].family == op.family


def test_the_journal_wraps_every_row():
    assert set(wrap.OPS) | set(wrap.OBJECT_P2P) == set(op_table.BY_NAME)
    assert not set(wrap.OPS) & set(wrap.OBJECT_P2P)


def test_each_faults_c10d_op_is_read_by_the_fault_mode():
    collective = {op.c10d for op in op_table.OPS if op.c10d and op.peer is None}
    assert collective == set(fault_mode._C10D), "a c10d op without its argument reader in fault_mode._C10D"
    reducing = {op.c10d for op in op_table.OPS if op.c10d and op.reduces}
    assert reducing == {k for k, v in fault_mode._C10D.items() if v[2] is not None}
    for op in op_table.OPS:
        assert op.c10d is None or hasattr(torch.ops.c10d, op.c10d), op.name
    assert {op.c10d for op in op_table.OPS if op.c10d and op.peer} == {"send", "recv_"}  # FaultMode._p2p's two


def test_each_mpi_method_is_a_method_of_the_mpi_group_and_every_op_method_has_a_row():
    named = {op.mpi for op in op_table.OPS if op.mpi}
    assert all(callable(getattr(mpi_backend.MpiGroup, m, None)) for m in named), named
    own = {m for m in vars(mpi_backend.MpiGroup) if not m.startswith("_") and hasattr(dist.ProcessGroup, m)}
    assert own - {"getBackendName", "group_name"} == named
    assert set(mpi_watch.WATCHED) == named


def test_each_family_is_read_by_the_metrics_and_each_model_by_the_models():
    assert list(metrics.OP_TABLE) == [f.name for f in op_table.FAMILIES]
    assert {op.family for op in op_table.OPS} == set(op_table.FAMILY)
    for f in op_table.MODELLED:
        m = f.model
        assert m.gloo[0] in algorithms.ALGORITHMS and m.gloo[0] in algorithms.CANDIDATES[f.name], f.name
        assert backend_choice.GLOO[f.name] == m.gloo
        assert op_table.BY_NAME[m.fitted].family == f.name and m.fitted in collectives.BY_VARIANT
        assert m.ring == bool(m.halving_doubling) == (m.fold is not None), f.name
        assert m.nccl is None or backend_choice.NCCL_OPS[m.nccl] == f.name
    assert algorithms.OPS == tuple(f.name for f in op_table.MODELLED)
