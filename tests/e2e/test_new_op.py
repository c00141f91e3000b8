"""Adding a torch.distributed function is one row of the op table and its builder: a copy of the repository's
tracked files, with a row for torch's ``_all_gather_base`` (the older name of all_gather_into_tensor) in
suite/op_table.py and a builder and REGISTRY line in suite/ops/collectives.py, and nothing else changed. The
table's rule tests accept it; a 2-rank Gloo run measures and checks it; the journal records its calls (the run's
trace names it, a ring file keeps its code); its record's bus bandwidth is its family's (all_gather: (n-1)/n);
and the models fit the all_gather link from it once its family's model names it as the form fitted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite import results
from tests.conftest import copy_tracked

pytestmark = pytest.mark.slow

NEW = "_all_gather_base"
ROW = f"""    Op(name="{NEW}", family="all_gather", code=20, group_at=2, async_at=3, c10d="_allgather_base_",
       mpi="all_gather_single"),
"""
BUILDER = f"""

def _all_gather_base(a, ctx):
    c = _chunk(ctx, a)
    inp, out = _t(ctx, a, c), _blank(ctx, a, c * ctx.world_size)
    return Buffers(
        call=lambda x: dist.{NEW}(out, inp, group=ctx.group, async_op=x),
        check=lambda: verify.count_wrong(out, _gathered(ctx, a, c)),
        outputs=lambda: [out],
        inputs=lambda: [inp],
    )
"""
REGISTERED = f'    Collective(op="all_gather", variant="{NEW}", chunked=True, build=_all_gather_base),\n'


def add_op(tree: Path) -> None:
    """The row (and its family's model fitted from it) and the builder, written into the copy ``tree``."""
    table = tree / "suite" / "op_table.py"
    text = table.read_text()
    end = '\n)\n"""The rows, in the order of their journal codes."""'
    assert text.count(end) == 1 and text.count('fitted="all_gather_into_tensor"') == 1
    text = text.replace(end, "\n" + ROW.rstrip("\n") + end).replace(
        'fitted="all_gather_into_tensor"', f'fitted="{NEW}"'
    )
    table.write_text(text)
    ops = tree / "suite" / "ops" / "collectives.py"
    text = ops.read_text()
    registry = "\n\nREGISTRY: tuple[Collective, ...] = (\n"
    assert text.count(registry) == 1
    before, after = text.split(registry)
    body, rest = after.split("\n)\n", 1)
    ops.write_text(before + BUILDER + registry + body + "\n" + REGISTERED.rstrip("\n") + "\n)\n" + rest)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    dst = copy_tracked(tmp_path_factory.mktemp("checkout"))
    add_op(dst)
    return dst


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's suite, not the checkout's
    env.update({"OMP_NUM_THREADS": "1", "SUITE_PROGRESS": "off", "SUITE_REPORT": "0"})
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=300, env=env)


def test_the_table_rules_accept_the_new_row(tree):
    p = _run(tree, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "tests/unit/test_op_table.py")
    assert p.returncode == 0, p.stdout[-3000:]


@pytest.fixture(scope="module")
def run(tree) -> Path:
    args = ["--nproc", "2", "--backend", "gloo", "--device", "cpu", "--experiments", "collectives"]
    args += ["--min-bytes", "1K", "--max-bytes", "4K", "--iters", "3", "--warmup", "1"]
    args += ["--results-root", "results", "--run-id", "new-op", "--", "-k", NEW]
    p = _run(tree, "-m", "suite.launch", *args)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return tree / "results" / "new-op"


def test_the_new_op_is_measured_checked_and_its_bus_bandwidth_is_its_familys(run):
    recs = [r for r in results.records(results.load_run(run)) if r.get("variant") == NEW]
    assert {1024, 4096} <= {r["size_bytes"] for r in recs}, recs[:1]
    for r in recs:
        assert r["op"] == "all_gather" and r["world_size"] == 2 and r["n_wrong"] == 0, r
        assert r["busbw_factor"] == 0.5 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 0.5), r


def test_the_journal_records_the_new_op(tree, run):
    trace = (run / "trace.json").read_text()
    assert f'"{NEW}"' in trace
    # and its ring file keeps it under its own code (what the launcher reads of a rank a signal ended)
    ring = _run(
        tree,
        "-c",
        "import sys; from pathlib import Path; from suite.common import journal_ring as j\n"
        "r = j.Ring(Path(sys.argv[1]), 'vm', 0.0); r.case('c'); r.put(sys.argv[2], '0', 1, (4,), None, None, 1, 0.0)\n"
        "r.map.flush(); print(j.read(Path(sys.argv[1]), 0)['tail'][0]['op'])",
        str(run / "new.ring"),
        NEW,
    )
    assert ring.returncode == 0 and ring.stdout.split() == [NEW], ring.stdout + ring.stderr


def test_the_models_fit_the_family_from_the_new_op(tree, run):
    p = _run(
        tree,
        "-c",
        "import json, sys; from suite import results; from suite.model import runs\n"
        "pts = runs.collective_points(results.load_run(sys.argv[1]))\n"
        "print(json.dumps(sorted({(p.op, p.record['variant']) for p in pts})))",
        str(run),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout) == [["all_gather", NEW]]
