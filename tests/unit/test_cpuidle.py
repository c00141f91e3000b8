"""suite/system/cpuidle.py: how the host's CPUs idle, read from a sysfs tree laid out as the kernel does."""

from __future__ import annotations

from pathlib import Path

from suite.system import cpuidle


def _tree(tmp_path: Path, driver="haltpoll", poll="0", disabled=("0", "0"), states=(("POLL", 0), ("haltpoll idle", 1))):
    root = tmp_path / "cpu"
    (root / "cpuidle").mkdir(parents=True)
    (root / "cpuidle" / "current_driver").write_text(driver + "\n")
    (root / "cpuidle" / "current_governor_ro").write_text("haltpoll\n")
    for cpu, off in enumerate(disabled):
        for i, (name, latency) in enumerate(states):
            d = root / f"cpu{cpu}" / "cpuidle" / f"state{i}"
            d.mkdir(parents=True)
            (d / "name").write_text(name + "\n")
            (d / "latency").write_text(f"{latency}\n")
            (d / "disable").write_text((off if i else "0") + "\n")
    param = tmp_path / "guest_halt_poll_ns"
    if poll is not None:
        param.write_text(poll + "\n")
    return str(root), str(param)


def test_a_guest_that_halts_at_once_is_named_with_what_it_costs(tmp_path):
    info = cpuidle.idle_states(*_tree(tmp_path))
    assert info["driver"] == "haltpoll" and info["guest_halt_poll_ns"] == 0
    assert [s["name"] for s in info["states"]] == ["POLL", "haltpoll idle"]
    assert cpuidle.halts_at_once(info)
    assert "wake-up through the hypervisor" in cpuidle.describe(info) and "halt poll 0 ns" in cpuidle.describe(info)


def test_polling_or_a_disabled_halt_state_is_not_flagged(tmp_path):
    polled = cpuidle.idle_states(*_tree(tmp_path / "a", poll="200000"))
    assert not cpuidle.halts_at_once(polled) and "hypervisor" not in cpuidle.describe(polled)
    off = cpuidle.idle_states(*_tree(tmp_path / "b", disabled=("1", "1")))
    assert off["states"][1]["disabled_cpus"] == [0, 1] and not cpuidle.halts_at_once(off)


def test_bare_metal_states_and_no_cpuidle_at_all(tmp_path):
    intel = cpuidle.idle_states(*_tree(tmp_path, driver="intel_idle", poll=None, states=(("POLL", 0), ("C6", 170))))
    assert intel["guest_halt_poll_ns"] is None and not cpuidle.halts_at_once(intel)
    assert "C6 170 us" in cpuidle.describe(intel)
    assert cpuidle.idle_states(str(tmp_path / "none"), str(tmp_path / "none2")) is None
    assert cpuidle.describe(None) == "idle states: not exposed here"
