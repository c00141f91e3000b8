"""Every fault switch has one grammar (suite/common/faults.py), and a bad value is one line before any rank starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.common import faults
from suite.common.config import ConfigError
from suite.common.switches import check_switches


def test_each_switch_reads_its_fields_in_order_with_optional_ones_filled_left_to_right():
    c = faults.parse("SUITE_INJECT_CORRUPTION", "all_reduce,broadcast")
    assert (c.fault, c.name, c.when) == ("flip", ("all_reduce", "broadcast"), "")
    c = faults.parse("SUITE_INJECT_CORRUPTION", "misroute:all_to_all@timed")
    assert (c.fault, c.name, c.when) == ("misroute", ("all_to_all",), "timed")
    d = faults.parse("SUITE_INJECT_DIVERGE", "skip:1:30:all_reduce", world_size=2)
    assert (d.action, d.rank, d.k, d.name) == ("skip", 1, 30, ("all_reduce",))
    assert faults.parse("SUITE_INJECT_DIVERGE", "sleep:0:1").name == ()
    f = faults.parse("SUITE_INJECT_FAULT", "stop:3:0", world_size=4)
    assert (f.action, f.rank, f.n) == ("stop", 3, 0)
    assert faults.parse("SUITE_INJECT_MISMATCH", "all_reduce").name == ("all_reduce",)


def test_the_usage_each_message_quotes_is_the_documented_spelling():
    usage = {name: s.usage() for name, s in faults.INJECTIONS.items()}
    assert usage == {
        "SUITE_INJECT_CORRUPTION": "[<fault>:]<name>[,<name>...][@timed]",
        "SUITE_INJECT_DELAY": "<rank>:<seconds>[:<name>[,<name>...]][@after|@before]",
        "SUITE_INJECT_MISMATCH": "<name>[,<name>...]",
        "SUITE_INJECT_DIVERGE": "<action>:<rank>:<k>[:<name>[,<name>...]][@below]",
        "SUITE_INJECT_FAULT": "<action>:<rank>:<n>",
        "SUITE_INJECT_BACKEND": "<fault>[:<name>[,<name>...]]",
    }
    docs = (Path(__file__).resolve().parents[2] / "docs" / "failures.md").read_text()
    for name, spelled in usage.items():
        assert f"`{name}={spelled}`" in docs, name


@pytest.mark.parametrize(
    ("switch", "value", "says"),
    [
        ("SUITE_INJECT_CORRUPTION", "flop:all_reduce", "unknown fault 'flop' (choose from flip, misroute)"),
        ("SUITE_INJECT_CORRUPTION", "all_reduce@later", "unknown phase @later"),
        ("SUITE_INJECT_CORRUPTION", "flip:,", "names no case"),
        ("SUITE_INJECT_DELAY", "1", "1 field(s), not 2 to 3"),
        ("SUITE_INJECT_DELAY", "2:0.1", "rank 2 is not a rank of this run (0..1)"),
        ("SUITE_INJECT_DIVERGE", "skip:1:0", "k must be >= 1, not 0"),
        ("SUITE_INJECT_DIVERGE", "hop:1:1", "unknown action 'hop'"),
        ("SUITE_INJECT_FAULT", "kill:0", "2 field(s), not 3"),
        ("SUITE_INJECT_FAULT", "kill:x:1", "rank 'x' is not an integer"),
        ("SUITE_INJECT_FAULT", "kill:5:1", "rank 5 is not a rank of this run (0..1)"),
        ("SUITE_INJECT_MISMATCH", "all_reduce@timed", "unknown phase @timed"),
    ],
)
def test_a_bad_switch_is_one_line_naming_it_the_problem_and_the_grammar(switch, value, says):
    with pytest.raises(ConfigError) as e:
        check_switches({switch: value}, world_size=2)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{switch}={value!r}: ") and says in msg
    assert msg.endswith(f"; expected {faults.INJECTIONS[switch].usage()}")


def test_unset_or_empty_switches_plant_nothing():
    check_switches({})
    check_switches(dict.fromkeys(faults.INJECTIONS, ""), world_size=2)


def test_names_pick_cases_and_no_names_pick_every_case():
    class Case:
        def answers_to(self, name):
            return name in ("collectives", "all_reduce")

    assert faults.targets((), Case()) and faults.targets(("broadcast", "all_reduce"), Case())
    assert not faults.targets(("broadcast",), Case())
