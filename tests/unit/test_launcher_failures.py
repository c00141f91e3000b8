"""The launcher's own failures (issue 27), pure logic: torchrun's traceback held back, the fault
switches checked before start, a results file that cannot be written or read named in one line."""

import pytest

from suite.config import ConfigError
from suite.preflight import check_injections
from suite.supervise import ElasticTraceback


TORCHRUN_WALL = [
    "Traceback (most recent call last):\n",
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n',
    "    raise ChildFailedError(\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
]


def _shown(lines):
    f = ElasticTraceback()
    out = [s for line in lines for s in f.feed(line)]
    return out + f.flush(), f.held


def test_torchruns_own_traceback_is_held_back_and_the_rest_shown():
    rank = ["[rank0]: Traceback (most recent call last):\n", "[rank0]: OSError: x\n"]
    box = ["=====\n", "Root Cause (first observed failure):\n"]
    shown, held = _shown(["W warning\n", *rank, *TORCHRUN_WALL, *box])
    assert shown == ["W warning\n", *rank, *box]
    assert held == TORCHRUN_WALL


def test_a_traceback_that_is_not_torchruns_passes_unchanged():
    chained = [
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in <module>\n',
        "KeyError: 'a'\n",
    ]
    crash = [
        "Traceback (most recent call last):\n",
        '  File "experiments/x.py", line 3, in <module>\n',
        "\n",
        "During handling of the above exception, another exception occurred:\n",
        "ImportError: no module named y\n",
    ]
    assert _shown([*chained, *crash]) == ([*chained, *crash], [])
    cut = TORCHRUN_WALL[:2]  # the stream ended inside a block: it is shown, not lost
    assert _shown(cut) == (cut, [])


def test_fault_switches_are_checked_before_start():
    check_injections({})
    check_injections({"SUITE_INJECT_CORRUPTION": "misroute:all_reduce,broadcast@timed", "SUITE_INJECT_DELAY": "1:0.5"})
    for env, says in (
        ({"SUITE_INJECT_CORRUPTION": "flop:all_reduce"}, "unknown fault 'flop'"),
        ({"SUITE_INJECT_CORRUPTION": "all_reduce@later"}, "unknown phase @later"),
        ({"SUITE_INJECT_CORRUPTION": "flip:,"}, "names no case"),
        ({"SUITE_INJECT_DELAY": "1"}, "SUITE_INJECT_DELAY='1': expected"),
    ):
        with pytest.raises(ConfigError, match=says):
            check_injections(env)
