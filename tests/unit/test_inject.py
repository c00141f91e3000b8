"""The fail-slow injector (suite/inject/): the seeded plan and its checks, the registry of classes (a new class
is one file), the truth kept from everything but the injector and a scorer, and the controller that always
reverts what it applied (no rank left stopped, no busy process left running)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from suite.common import timed_start
from suite.errors import ConfigError
from suite.inject import launcher, plan, registry, truth
from suite.inject.effects import DutyCycle, Hogs

from tests.helpers.inject import FAKE_TORCHRUN, ROOT, end_fake_launch
from tests.helpers.inject import until as _until


def test_the_classes_are_the_files_of_the_folder_in_their_order():
    files = sorted(p.stem for p in registry.CLASSES_DIR.glob("*.py") if not p.stem.startswith("_"))
    assert sorted(registry.discover()) == files
    assert list(registry.discover())[:4] == ["pause", "slow", "noisy", "membw"]
    for c in registry.discover().values():
        assert c.limits[0] <= c.drawn[0] <= c.drawn[1] <= c.limits[1], c.name


NEW_CLASS = """
from suite.inject.kind import InjectionClass

CLASS = InjectionClass(name="{name}", order=9, summary="nothing", severity="none", limits=(1, 2), drawn=(1, 2),
                       start=lambda target, severity: None)
"""


def test_a_new_class_is_one_file(tmp_path, monkeypatch):
    pkg = tmp_path / "more_classes"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "throttle.py").write_text(NEW_CLASS.format(name="throttle"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(registry.discover(pkg, "more_classes")) == ["throttle"]
    (pkg / "wrongly.py").write_text(NEW_CLASS.format(name="other"))
    with pytest.raises(ValueError, match="name it 'wrongly'"):
        registry.discover(pkg, "more_classes")


def test_a_plan_is_the_same_for_the_same_text_and_seed_and_each_given_field_is_kept():
    assert plan.parse("random", 3, 4, 30) == plan.parse("random", 3, 4, 30)
    drawn = {plan.parse("random", s, 4, 30) for s in range(20)}
    assert len({p.cls for p in drawn}) > 1 and len({p.target for p in drawn}) > 1
    for s in range(20):
        r, p = plan.parse("random", s, 4, 30), plan.parse("pause", s, 4, 30)
        assert (p.cls, p.target, p.onset_s, p.duration_s) == ("pause", r.target, r.onset_s, r.duration_s)
        lo, hi = registry.discover()["pause"].drawn
        assert lo <= p.severity <= hi and 0.2 * 30 <= p.onset_s <= 0.5 * 30
    given = plan.parse("noisy:1:2.5:3:rest", 0, 2, 30)
    assert (given.cls, given.target, given.onset_s, given.severity, given.duration_s) == ("noisy", 1, 2.5, 3, None)
    assert plan.parse("slow::4", 5, 2, 30).target == plan.parse("random", 5, 2, 30).target
    assert plan.parse("", 0, 2) is None and plan.parse("none", 0, 2) is None


@pytest.mark.parametrize(
    "inject, says",
    [
        ("gc", "unknown class 'gc'; choose from pause, slow, noisy, membw, cpu, nodecpu, egress or random"),
        ("pause:2", "target rank '2' does not exist (the run has ranks 0-1)"),
        ("pause:x", "target rank 'x' does not exist"),
        ("pause:1:30", "onset 30 s is past the run's end (INJECT_RUN_S=30)"),
        ("pause:1:-1", "onset '-1' is not a number of seconds >= 0"),
        ("pause:1:1:11", "severity 11 of pause is out of range: a number in [0.01, 10]"),
        ("noisy:1:1:2.5", "severity 2.5 of noisy is out of range: a whole number in [1, 16]"),
        ("slow:0:1:1", "severity 1 of slow is out of range"),
        ("pause:1:1:1:0", "duration 0"),
        ("random:1", "random takes no other field"),
        ("pause:1:1:1:1:1", "at most 5 fields"),
    ],
)
def test_bad_input_names_the_field_to_change(inject, says):
    with pytest.raises(ConfigError) as e:
        plan.parse(inject, 0, 2, 30)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "env, says",
    [
        ({"INJECT": "pause", "SEED": "-1"}, "SEED='-1': a whole number >= 0"),
        ({"INJECT": "pause:0:5", "INJECT_RUN_S": "4"}, "onset 5 s is past the run's end (INJECT_RUN_S=4)"),
        ({"INJECT": "pause", "INJECT_RUN_S": "soon"}, "INJECT_RUN_S='soon'"),
    ],
)
def test_the_knobs_are_read_from_the_environment(env, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        plan.from_env(env, 2)
    assert plan.from_env({"INJECT": "slow", "SEED": "4", "INJECT_RUN_S": "30"}, 2) == plan.parse("slow", 4, 2, 30)


def test_the_launcher_refuses_a_bad_plan_in_one_line_with_status_2_before_any_rank():
    cmd = [sys.executable, "-m", "suite.launch", "--nproc", "2", "--experiments", "collectives", "--check"]
    env = {**os.environ, "INJECT": "pause:3"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "target rank '3' does not exist" in proc.stderr, proc.stderr


TRUTH_READERS = (
    "suite/inject/",
    "suite/report/failslow/",
    "experiments/recovery/disconnect.py",
    "experiments/recovery/measure.py",
)
"""Where the truth may be read: the injectors (the fail-slow classes; the recovery lab's disconnect, struck from the
host), the fail-slow bench that scores finished runs, and the recovery lab's scoring of a finished job."""


def test_nothing_but_the_injector_names_the_truth():
    pattern = re.compile(r"inject(\.| import )truth|truth\.read|injections-|[\"']truth[\"'/]")
    found = [
        str(p.relative_to(ROOT))
        for top in ("suite", "experiments")
        for p in (ROOT / top).rglob("*.py")
        if pattern.search(p.read_text()) and not str(p.relative_to(ROOT)).startswith(TRUTH_READERS)
    ]
    assert found == []
    assert pattern.search("from suite.inject import truth") and pattern.search('run / "truth" / "x.json"')


def test_the_truth_is_its_owners_only_and_read_back_for_scoring(tmp_path):
    p = truth.write(tmp_path, {"plan": {"cls": "pause"}})
    assert p.parent == tmp_path / "truth" and oct(p.stat().st_mode & 0o777) == "0o600"
    assert oct(p.parent.stat().st_mode & 0o777) == "0o700"
    assert truth.read(tmp_path) == [{"plan": {"cls": "pause"}}]


def _sleeper(**env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, **env}, stdin=subprocess.DEVNULL
    )


def _stopped(pid: int) -> bool:
    return psutil.Process(pid).status() == psutil.STATUS_STOPPED


def test_a_duty_cycle_stops_the_process_and_always_leaves_it_running():
    proc = _sleeper()
    try:
        duty = DutyCycle(proc.pid, 0.01, 60)  # stopped for a minute after 10 ms
        _until(lambda: _stopped(proc.pid), "stopped")
        duty.stop()
        assert not _stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_duty_cycle_that_stops_a_process_as_it_runs_never_stops_it_asleep_in_a_wait():
    """A garbage collector's pause comes as the program runs: ``running`` waits for the process's main thread to
    run. One asleep throughout (a rank in a wait at a collective) is never stopped; one that runs, promptly."""
    asleep = _sleeper()
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        _until(lambda: psutil.Process(asleep.pid).status() == psutil.STATUS_SLEEPING, "asleep")  # started
        idle, busy = DutyCycle(asleep.pid, 0.01, 60, running=True), DutyCycle(spinning.pid, 0.01, 60, running=True)
        _until(lambda: _stopped(spinning.pid), "stopped")
        time.sleep(0.5)  # 50 times its run of 10 ms
        assert not _stopped(asleep.pid)
        for duty in (idle, busy):
            duty.stop()
        assert not _stopped(spinning.pid)
    finally:
        for proc in (asleep, spinning):
            proc.kill()
            proc.wait()


def _may_run_real_time() -> bool:
    """Whether a thread of this process may ask for real-time FIFO (asked in a thread of its own)."""
    import threading

    said = []

    def ask():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            said.append(True)
        except OSError:
            said.append(False)

    t = threading.Thread(target=ask)
    t.start()
    t.join()
    return said[0]


def test_a_duty_cycle_s_thread_runs_ahead_of_the_host_s_work_where_it_may():
    """On a loaded host a thread of normal priority wakes tens of ms late: the rank's runs of a few ms would last
    that long. Where the process may, the duty cycle's thread (alone) is real-time FIFO."""
    proc = _sleeper()
    try:
        duty = DutyCycle(proc.pid, 60, 0.01)  # runs a minute before its first stop: no signal in this test
        _until(lambda: duty.thread.native_id is not None, "started")
        want = os.SCHED_FIFO if _may_run_real_time() else os.SCHED_OTHER
        _until(lambda: os.sched_getscheduler(duty.thread.native_id) == want, f"scheduled with policy {want}")
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the controller's other threads as they were
        duty.stop()
    finally:
        proc.kill()
        proc.wait()


def test_hogs_run_on_the_cores_given_and_end_when_stopped():
    cores = frozenset(sorted(os.sched_getaffinity(0))[:1])
    hogs = Hogs(2, cores, size=4096)
    _until(lambda: all(set(psutil.Process(p.pid).cpu_affinity()) == cores for p in hogs.procs), "pinned")
    hogs.stop()
    assert all(p.poll() is not None for p in hogs.procs)


@pytest.mark.parametrize("ending", ["end", "sigkill"])
def test_the_controller_pauses_the_target_and_never_leaves_it_stopped(tmp_path, ending):
    """A pause of a minute on rank 1 of a stand-in for torchrun: applied once the rank's session starts (its ring
    file), and the rank running again when the launcher ends the controller, or polls one that was killed."""
    env = {"INJECT": "pause:1:0:10:rest", "SEED": "0", "INJECT_RUN_S": "60", "OTHER": "kept"}
    ctl = launcher.begin(env, tmp_path, 2)
    assert env == {"OTHER": "kept"}  # the ranks never see the plan
    fake = subprocess.Popen([sys.executable, "-c", FAKE_TORCHRUN], stdin=subprocess.DEVNULL)
    try:
        _until(lambda: len(psutil.Process(fake.pid).children()) == 2, "started")
        (tmp_path / "hang").mkdir()
        (tmp_path / "hang" / "rank1.ring").write_bytes(b"")
        ctl.poll(fake.pid)
        _until(lambda: truth.read(tmp_path)[0].get("applied"), "applied")
        rank1 = next(p for p in psutil.Process(fake.pid).children() if p.environ().get("RANK") == "1")
        _until(lambda: _stopped(rank1.pid), "stopped")
        if ending == "end":
            ctl.end()
            assert "reverted_unix" in truth.read(tmp_path)[0]
        else:
            ctl.proc.send_signal(signal.SIGKILL)
            _until(lambda: ctl.poll(fake.pid) or ctl.proc is None, "seen dead")
        assert not _stopped(rank1.pid)
        assert [p.status() != psutil.STATUS_STOPPED for p in psutil.Process(fake.pid).children()] == [True, True]
    finally:
        end_fake_launch(fake, ctl)


def test_the_onset_counts_from_the_targets_first_timed_step_not_its_start(tmp_path):
    """A pause at 0.2 s on rank 1: the rank's session starts (its ring file), and only its first timed sample (the
    file the harness's phases create, suite/common/timed_start.py) starts the onset's clock, however long after."""
    ctl = launcher.begin({"INJECT": "pause:1:0.2:10:rest", "SEED": "0", "INJECT_RUN_S": "60"}, tmp_path, 2)
    fake = subprocess.Popen([sys.executable, "-c", FAKE_TORCHRUN], stdin=subprocess.DEVNULL)
    try:
        _until(lambda: len(psutil.Process(fake.pid).children()) == 2, "started")
        (tmp_path / "hang").mkdir()
        (tmp_path / "hang" / "rank1.ring").write_bytes(b"")
        ctl.poll(fake.pid)
        time.sleep(1.0)  # the set-up and warm-up of a loaded host: longer than the onset
        assert not truth.read(tmp_path)[0].get("applied")
        timed_at = time.time()
        timed_start.path(tmp_path, 1).touch()
        _until(lambda: truth.read(tmp_path)[0].get("applied"), "applied")
        told = truth.read(tmp_path)[0]
        assert told["anchor_unix"] >= timed_at
        assert told["applied_unix"] - told["anchor_unix"] >= 0.2
    finally:
        end_fake_launch(fake, ctl)


def test_the_plans_knobs_are_exported_by_make_and_passed_to_compose_nodes():
    from suite.common.knobs import HOST_KNOBS
    from tests.conftest import load_script

    kf = load_script("knob_files")
    assert tuple(k.env for k in HOST_KNOBS) == launcher.KNOBS
    assert "\nexport INJECT SEED INJECT_RUN_S\n" in kf.mk_text()
    compose = (ROOT / kf.COMPOSE).read_text()
    assert all(f"    {k}: ${{{k}:-}}\n" in compose for k in launcher.KNOBS)


def test_the_docs_list_every_class_with_its_ranges():
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^\| `(\w+)` \|[^|]+\|[^|]+\| ([^|]+\|[^|]+)\|$", (ROOT / "docs" / "inject.md").read_text(), re.M
        )
    }
    for name, c in registry.discover().items():
        want = " | ".join(f"{lo:g}-{hi:g}" for lo, hi in (c.limits, c.drawn))
        assert rows.get(name, "").strip() == want, name


ORPHANING = """
import sys, time
from suite.inject.effects import Hogs
hogs = Hogs(2, frozenset(), size=int(sys.argv[1]))
print(" ".join(str(p.pid) for p in hogs.procs), flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("size", [0, 2**20])
def test_hogs_end_on_their_own_when_their_controller_is_killed(size):
    parent = subprocess.Popen([sys.executable, "-c", ORPHANING, str(size)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    parent.kill()
    parent.wait()
    _until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids), "ended")
