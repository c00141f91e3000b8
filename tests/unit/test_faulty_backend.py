"""The planted faults (suite/harness/plant/backend.py) as torch's own layers meet them, on a one-rank plain Gloo
group in this process: what an armed op returns is what Gloo's would (DDP's reducer reads it), and the ops torch
issues in forms of its own (the coalesced ones) are planted too."""

import tempfile

import pytest
import torch
import torch.distributed as dist

from suite.harness import c10d
from suite.harness.plant import backend as faulty_backend, mode as fault_mode
from suite.harness.plant.mode import Planting


@pytest.fixture(scope="module")
def world():
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()


def test_an_armed_collective_s_future_holds_its_output_tensors(world):
    # DDP's allreduce comm hook chains on the Work's future and reads its value as the bucket's tensors: a None
    # there crashed the reducer (SIGSEGV) on the first armed step.
    t = torch.ones(4)
    with faulty_backend.armed("drop", Planting()):
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    (value,) = work.get_future().value()
    assert value is t or value.data_ptr() == t.data_ptr()


def test_each_tensor_of_a_coalesced_all_reduce_is_planted(world):
    # torch's coalescing manager issues one c10d op for several tensors (allreduce_coalesced_): each is one output
    # (on one rank, misroute's places are its elements: each tensor comes back rotated by one)
    ts = [torch.arange(4.0), torch.arange(4.0, 8.0)]
    with faulty_backend.armed("misroute", Planting()), dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    assert [t.tolist() for t in ts] == [[1.0, 2.0, 3.0, 0.0], [5.0, 6.0, 7.0, 4.0]]


def test_outside_an_armed_call_the_ops_are_gloo_s(world):
    t = torch.arange(4.0)
    with faulty_backend.armed(None, Planting()):
        dist.all_reduce(t)
    dist.all_reduce(t)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_fault_a_receive_s_thread_could_not_apply_fails_the_armed_call(world):
    # a receive's fault is applied by a thread once its data has arrived, and torch's Work made from a future
    # completes when the future fails (its wait does not raise): a pipeline stage's receive buffer, a leaf of the
    # last step's graph, made the in-place fault raise there, and the step went on with the data unfaulted
    planting = Planting()
    with pytest.raises(RuntimeError, match="planted drop could not be applied"):
        with faulty_backend.armed("drop", planting):
            work = fault_mode._then(planting, c10d.completed_work(), lambda: 1 / 0)
            dist.Work.unbox(work).wait()
    leaf = torch.zeros(2, requires_grad=True)  # what the thread writes is no autograd op
    with faulty_backend.armed("drop", planting):
        dist.Work.unbox(fault_mode._then(planting, c10d.completed_work(), lambda: leaf.fill_(1.0))).wait()
    assert leaf.tolist() == [1.0, 1.0]


def test_a_work_from_a_failed_future_completes_without_raising():
    # what fault_mode._then relies on keeping its own errors for (c10d.work_from_future's docstring): were torch
    # to raise here one day, the docstring and that error path would be worth a second look
    fut = torch.futures.Future()
    work = c10d.work_from_future(fut)
    fut.set_exception(RuntimeError("planted"))
    assert work.wait() is True


def test_misroute_moves_the_outputs_of_one_shape_among_outputs_of_several():
    # an all_to_all of uneven splits returns outputs of several shapes: the class (and SUITE_INJECT_CORRUPTION's
    # misroute, the same function) moves those of one shape one place over; the class once left them all correct
    from suite.harness.plant.corruptions import Corrupter, misroute

    def outs():
        return [torch.arange(2.0), torch.arange(10.0, 13.0), torch.arange(20.0, 22.0)]

    planted = outs()
    Corrupter(3, lambda: [0, 1, 2]).apply("misroute", "alltoall_", planted, None, [])
    assert [t.tolist() for t in planted] == [[20.0, 21.0], [10.0, 11.0, 12.0], [0.0, 1.0]]
    buffers = outs()
    misroute(buffers, 3)
    assert [t.tolist() for t in buffers] == [t.tolist() for t in planted]
