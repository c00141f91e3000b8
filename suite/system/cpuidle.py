"""How this host's CPUs idle, and what that costs a blocking op: the kernel's cpuidle driver, its states, and a
KVM guest's halt polling. Torch-free.

A blocking op hands its work to another thread (Gloo's worker, MPI's progress) and sleeps until it is done. On an
idle CPU the thread that must wake sits in an idle state; leaving it takes that state's exit latency. On a virtual
machine whose vCPUs halt at once when idle (cpuidle ``haltpoll`` with ``guest_halt_poll_ns`` 0, or a plain HLT), the
wake-up is an interrupt through the hypervisor: tens of microseconds, more than a small op itself. A loaded machine
keeps its vCPUs running, so a small op can read faster there than on the same machine idle. Figures measured here
and the command that shows them: docs/metrics.md ("Idle CPUs and a blocking op")."""

from __future__ import annotations

from pathlib import Path

ROOT = "/sys/devices/system/cpu"
HALTPOLL = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"


WAKE_UP = (
    "an idle vCPU halts at once (cpuidle haltpoll, guest halt poll 0 ns): a blocking op that waits for another "
    "thread includes a wake-up through the hypervisor, up to tens of microseconds, so small-message times (latency, "
    "the fits' alpha) read slower and noisier on a lightly loaded host than on a busy one"
)
"""What a host whose idle vCPUs halt at once does to the times it measures (docs/metrics.md, "Idle CPUs and a
blocking op")."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def idle_states(root: str = ROOT, haltpoll: str = HALTPOLL) -> dict | None:
    """The cpuidle driver and governor, each idle state (name, exit latency in µs, the CPUs it is disabled on) as
    cpu0 lists them, and a KVM guest's halt-poll window in ns (None where the haltpoll module is not loaded); None
    where the kernel exposes no cpuidle (not Linux, or a container without /sys)."""
    base = Path(root)
    driver = _read(base / "cpuidle" / "current_driver")
    if driver is None:
        return None
    cpus = sorted(p for p in base.glob("cpu[0-9]*") if (p / "cpuidle").is_dir())
    states = []
    for st in sorted((base / "cpu0" / "cpuidle").glob("state[0-9]*"), key=lambda p: int(p.name[5:])):
        off = [int(c.name[3:]) for c in cpus if _read(c / "cpuidle" / st.name / "disable") == "1"]
        latency = _read(st / "latency")
        states.append(
            {"name": _read(st / "name"), "latency_us": int(latency) if latency else None, "disabled_cpus": off}
        )
    poll = _read(Path(haltpoll))
    return {
        "driver": driver,
        "governor": _read(base / "cpuidle" / "current_governor_ro") or _read(base / "cpuidle" / "current_governor"),
        "states": states,
        "guest_halt_poll_ns": int(poll) if poll and poll.isdigit() else None,
    }


def halts_at_once(info: dict | None) -> bool:
    """Whether an idle CPU here halts without polling first: a KVM guest's haltpoll driver with a halt-poll window
    of 0 ns and its halting state enabled on some CPU (the state past POLL)."""
    if not info or info.get("driver") != "haltpoll" or info.get("guest_halt_poll_ns") != 0:
        return False
    halting = [s for s in info.get("states") or [] if s.get("name") != "POLL"]
    return any(len(s.get("disabled_cpus") or []) == 0 for s in halting) if halting else True


def describe(info: dict | None) -> str:
    """One line for a benchmark's header: how the CPUs idle and, where an idle vCPU halts at once, what it costs."""
    if not info:
        return "idle states: not exposed here"
    names = ", ".join(
        f"{s['name']}" + (f" {s['latency_us']} us" if s.get("latency_us") else "") for s in info["states"]
    )
    line = f"idle states: {info['driver']} ({names or 'none listed'})"
    if info.get("guest_halt_poll_ns") is not None:
        line += f", guest halt poll {info['guest_halt_poll_ns']} ns"
    if halts_at_once(info):
        line += ": " + WAKE_UP.split(": ", 1)[1]
    return line
