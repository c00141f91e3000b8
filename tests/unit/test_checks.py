"""The checks around a case's own (suite/harness/checks.py, verify.output/describe/Wrong): poison, guard bands,
inputs left as they were, a stale output, and the words for each."""

import pytest
import torch

from suite.case import Buffers
from suite.harness import checks, verify
from suite.common.backends import PreflightError, check_planted_backend


@pytest.mark.parametrize("misalign", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_an_output_starts_as_poison_inside_intact_guard_bands(dtype, misalign):
    out = verify.output(10, dtype, misalign=misalign)
    assert verify.is_poison(out).all() and verify.guard_damage(out) == []
    whole, before = out.suite_guard
    g = verify.GUARD_BYTES // whole.element_size()
    assert out.storage_offset() == before == g + misalign and whole.numel() == before + 10 + g
    assert (out.data_ptr() % 16 != 0) == misalign  # one element off a fresh allocation's alignment
    whole[before + 10] = 1  # the first element past the end
    whole[before - 1] = 1  # the last one before the start
    assert verify.guard_damage(out) == [("before", 1), ("after", 1)]


def test_poison_is_no_value_a_pattern_or_reduction_holds():
    for dtype in verify.DTYPE_OF.values():
        for redop in ("sum", "product", "min", "max", "none"):
            p = verify.pattern(1, 64, dtype, redop=redop, world_size=2)
            assert not verify.is_poison(p).any()


def test_describe_tells_poison_from_misplaced_from_wrong_values():
    expected = torch.arange(1.0, 9.0)
    got = verify.output(8, torch.float32)
    got[:4] = expected[:4]
    got[4] = expected[0]  # a value that belongs elsewhere
    got[5] = 100.0  # a value that belongs nowhere
    n = verify.count_wrong(got, expected)
    assert n == 4
    (line,) = n.found
    assert "poison left at 2 element(s) (never written; first at 6)" in line
    assert "1 element(s) hold values that belong elsewhere in the result (misplaced; first at 4)" in line
    assert "1 wrong value(s) (first at 5: 100 where 6 was expected)" in line
    assert verify.count_wrong(expected, expected) == 0 and verify.count_wrong(expected, expected).found == ()


def test_wrong_counts_add_up_with_their_words():
    a = verify.Wrong(2, ["a"])
    total = sum([a, 0, verify.Wrong(3, ["b"])])
    assert total == 5 and total.found == ("a", "b")
    assert (a + 1) == 3 and (a + 1).found == ("a",)


def _buffers(out, inp):
    return Buffers(call=lambda x: None, check=lambda: verify.count_wrong(out, torch.ones(4)), outputs=lambda: [out],
                   inputs=lambda: [inp])  # fmt: skip


def test_examine_names_an_overrun_a_changed_input_and_a_stale_output():
    out, inp = verify.output(4, torch.float32), torch.arange(4.0)
    b = _buffers(out, inp)
    before = checks.inputs_before(b)
    out.fill_(1.0)
    out.suite_guard[0][-1] = 7.0  # past the end
    inp[0] = -1.0  # written into the input
    wrong, found = checks.examine(b, "all_gather", before)
    assert wrong == 2
    assert found == [
        "guard band after the output overwritten (all_gather output 0: 1 element(s))",
        "input 0 of all_gather changed by the call at 1 element(s) (an out-of-place op wrote into it)",
    ]
    earlier = [torch.full((4,), 2.0)]
    out.fill_(2.0)  # the check run's result again
    out.suite_guard[0][-1] = verify.sentinel(torch.float32)
    wrong, found = checks.examine(b, "all_gather", earlier=earlier)
    assert wrong == 4 and "output 0 of all_gather holds the check run's result again (stale" in found[-1]


def test_distinct_keeps_the_first_line_of_each_kind():
    lines = [
        "check run: poison left at 3 element(s) (first at 4)",
        "check run: poison left at 5 element(s) (first at 1)",
        "timed: guard band after the output overwritten (x output 1: 3 element(s))",
    ]
    assert checks.distinct(lines) == [lines[0], lines[2]]


def test_the_planted_backend_is_refused_off_gloo_on_cpu():
    env = {"SUITE_INJECT_BACKEND": "drop"}
    check_planted_backend("gloo", "cpu", env)
    check_planted_backend("nccl", "cuda", {})
    for backend, device in (("nccl", "cuda"), ("gloo", "cuda")):
        with pytest.raises(PreflightError, match="run over Gloo on CPU: run it with BACKEND=gloo DEVICE=cpu"):
            check_planted_backend(backend, device, env)
