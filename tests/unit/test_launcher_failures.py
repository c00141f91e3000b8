"""The launcher's own failures (issue 27), pure logic: torchrun's traceback held back, the fault
switches checked before start, a results file that cannot be written or read named in one line."""

import pytest

from suite.config import ConfigError
from suite.preflight import check_injections


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
