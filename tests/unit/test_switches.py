"""Every suite switch is declared once (suite/config.py SWITCHES) with its validator: unset means its
default, a good value is read as documented, a bad one is one line naming the switch."""

from __future__ import annotations

import pytest

from suite.config import SWITCHES, ConfigError, check_switches, switch

BAD = {
    "SUITE_PROGRESS": ("live", "choose auto"),
    "SUITE_PROGRESS_S": ("-1", "a number >= 0"),
    "SUITE_PROFILE": ("all reduce", "no spaces"),
    "SUITE_REPORT": ("maybe", "choose 1 (on) or 0 (off)"),
    "SUITE_ALL_RANKS_OUTPUT": ("2", "choose 1 (on) or 0 (off)"),
    "SUITE_KEEP_RANK_SAMPLES": ("yes please", "choose 1 (on) or 0 (off)"),
    "SUITE_GIT_COMMIT": ("abc def", "no spaces"),
    "SUITE_INJECT_CORRUPTION": ("flop:all_reduce", "unknown fault 'flop'"),
    "SUITE_INJECT_DELAY": ("2:0.1", "rank 2 is not a rank of this run (0..1)"),
    "SUITE_INJECT_MISMATCH": ("all_reduce@timed", "unknown phase @timed"),
    "SUITE_INJECT_DIVERGE": ("skip:1:0", "k must be >= 1"),
    "SUITE_INJECT_FAULT": ("kill:0", "2 field(s), not 3"),
}


def test_every_switch_has_a_bad_value_here():
    assert sorted(BAD) == sorted(SWITCHES)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_switch_is_one_line_naming_it(name):
    value, says = BAD[name]
    with pytest.raises(ConfigError) as e:
        check_switches({name: value}, world_size=2)
    msg = str(e.value)
    assert msg.startswith(f"{name}={value!r}: ") and says in msg and "\n" not in msg, msg
    with pytest.raises(ValueError, match=f"^{name}="):
        switch(name, {name: value} if not name.startswith("SUITE_INJECT_") else {name: "nonsense:::::"})


def test_unset_or_empty_is_the_default():
    for name, sw in SWITCHES.items():
        assert switch(name, {}) == sw.value_if_unset == switch(name, {name: "  "}), name
    assert (switch("SUITE_PROGRESS", {}), switch("SUITE_PROGRESS_S", {}), switch("SUITE_REPORT", {})) == (
        "auto",
        30.0,
        True,
    )
    check_switches({})
    check_switches(dict.fromkeys(SWITCHES, ""))


def test_good_values_read_as_documented():
    assert switch("SUITE_PROGRESS", {"SUITE_PROGRESS": " Plain "}) == "plain"
    assert switch("SUITE_PROGRESS_S", {"SUITE_PROGRESS_S": "0"}) == 0.0
    assert switch("SUITE_REPORT", {"SUITE_REPORT": "0"}) is False
    assert switch("SUITE_KEEP_RANK_SAMPLES", {"SUITE_KEEP_RANK_SAMPLES": "On"}) is True
    assert switch("SUITE_ALL_RANKS_OUTPUT", {"SUITE_ALL_RANKS_OUTPUT": "0"}) is False
    assert switch("SUITE_PROFILE", {"SUITE_PROFILE": "all"}) is True
    assert switch("SUITE_PROFILE", {"SUITE_PROFILE": "all_reduce"}) == "all_reduce"
    assert switch("SUITE_GIT_COMMIT", {"SUITE_GIT_COMMIT": "abc123"}) == "abc123"
    d = switch("SUITE_INJECT_DELAY", {"SUITE_INJECT_DELAY": "1:0.5:all_reduce@before"})
    assert (d.rank, d.seconds, d.name, d.when) == (1, 0.5, ("all_reduce",), "before")


def test_a_fault_switch_checks_the_rank_against_the_world_only_when_told_it():
    check_switches({"SUITE_INJECT_FAULT": "kill:3:0"})
    with pytest.raises(ConfigError, match="rank 3 is not a rank of this run"):
        check_switches({"SUITE_INJECT_FAULT": "kill:3:0"}, world_size=2)
