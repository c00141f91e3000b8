"""The planted faults' mechanism (suite/harness/plant/mode.py) on the reducing ops no case of the fault catalogue
issues as they are (tests/dist/test_fault_catalogue_dist.py): the coalesced forms torch's coalescing manager issues
as one c10d op, and the functional collectives called by hand, at 2 Gloo ranks. wrong_reduction must reduce
each of them with the other op (here max where sum was asked: rank r holds r + 1, so 2 where 3 is right), and drop
must leave part of each one's output unwritten (every pair of a coalesced op, not only its first)."""

import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from suite.harness.plant import backend as faulty_backend
from suite.harness.plant.mode import Planting
from tests.dist.local_group import gloo_rank


def _reduced(fault: str | None) -> dict:
    """The values each output of each reducing form holds on this rank with ``fault`` planted."""
    r = dist.get_rank()
    a, b = torch.full((4,), r + 1.0), torch.full((2,), r + 1.0)
    out, name = torch.empty(2), dist.group.WORLD.group_name
    with faulty_backend.armed(fault, Planting()):
        with dist._coalescing_manager(async_ops=True) as cm:  # c10d.allreduce_coalesced_
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        rs = [torch.full((1,), -1.0), torch.full((2,), -1.0)]
        with dist._coalescing_manager(async_ops=True) as cm:  # c10d.reduce_scatter_tensor_coalesced_
            dist.reduce_scatter_tensor(rs[0], torch.full((2,), r + 1.0))
            dist.reduce_scatter_tensor(rs[1], torch.full((4,), r + 1.0))
        cm.wait()
        fn = torch.ops._c10d_functional
        f_ar = fn.wait_tensor(fn.all_reduce(torch.full((4,), r + 1.0), "sum", name))
        f_rs = fn.wait_tensor(fn.reduce_scatter_tensor(torch.full((4,), r + 1.0), "sum", 2, name))
        f_co = [fn.wait_tensor(t) for t in fn.all_reduce_coalesced([out.fill_(r + 1.0)], "sum", name)]
    got = {"coalesced all_reduce": [a, b], "coalesced reduce_scatter": rs, "functional all_reduce": [f_ar]}
    got |= {"functional reduce_scatter": [f_rs], "functional all_reduce_coalesced": f_co}
    return {k: [sorted(set(t.tolist())) for t in ts] for k, ts in got.items()}


def _rank(rank: int, store: str, out: str) -> None:
    with gloo_rank(rank, 2, store):
        got = {str(fault): _reduced(fault) for fault in (None, "wrong_reduction", "drop")}
    if rank == 0:
        Path(out).write_text(json.dumps(got))


def test_wrong_reduction_and_drop_reach_the_coalesced_and_the_functional_reductions(tmp_path):
    out = tmp_path / "got.json"
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(out)), nprocs=2, join=True)
    got = json.loads(out.read_text())
    assert all(values == [3.0] for outs in got["None"].values() for values in outs), got["None"]
    assert {form: outs for form, outs in got["wrong_reduction"].items() if any(v != [2.0] for v in outs)} == {}
    assert {form: outs for form, outs in got["drop"].items() if any(v == [3.0] for v in outs)} == {}
