"""The planted faulty backend (suite/harness/faulty_backend.py) as torch's own layers use it, on a one-rank group in
this process: what an armed op returns is what Gloo's would (DDP's reducer reads it), and the group has the name
c10d registered it under (a DeviceMesh looks groups up by it)."""

import tempfile

import pytest
import torch
import torch.distributed as dist

from suite.harness import faulty_backend


@pytest.fixture(scope="module")
def world():
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group(faulty_backend.register(), init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()


def test_an_armed_collective_s_future_holds_its_output_tensors(world):
    # DDP's allreduce comm hook chains on the Work's future and reads its value as the bucket's tensors: a None
    # there crashed the reducer (SIGSEGV) on the first armed step.
    t = torch.ones(4)
    with faulty_backend.armed(world, "drop"):
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    (value,) = work.get_future().value()
    assert value is t or value.data_ptr() == t.data_ptr()


def test_the_group_has_its_c10d_name_and_makes_a_device_mesh(world):
    from torch.distributed.device_mesh import init_device_mesh

    assert world.group_name == "0"  # was: RuntimeError "ProcessGroup name not set"
    mesh = init_device_mesh("cpu", (1,))
    assert mesh.get_group() is world
