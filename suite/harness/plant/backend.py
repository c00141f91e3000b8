"""The planted faults: the ops of the cases ``SUITE_INJECT_BACKEND`` arms return results wrong the way one class of
real bug makes them wrong. They prove the checks (suite/harness/verify.py and the harness's own) against each
class; docs/metrics.md has the table of what catches what.

``SUITE_INJECT_BACKEND=<fault>[:<name>[,<name>...]]`` (suite/common/faults.py) keeps the run's process group on
plain Gloo (CPU only; the launcher's preflight says so before any rank starts) and has the harness plant the fault
around each call of a matching case (``armed``), in the check run and in the timed samples, with a dispatch mode
(suite/harness/plant/mode.py) on every rank: no experiment knows, and the mode sees every op c10d issues through
the dispatcher on any group, torch's own layers' too (DDP's reducer, FSDP2, DTensor's functional collectives, the
pipeline schedules). It is no backend a user can pick (``BACKEND`` does not list it), and every record made under
it says so (``planted_fault``). Every other op (the harness's own barriers and reductions, the support probes)
runs with no mode there. Each op still runs on Gloo, once, on every rank, so the ranks stay in step and c10d's
sequence numbers count as they do on Gloo; the fault is applied to this rank's result
(suite/harness/plant/corruptions.py):

- ``drop``: the last chunk of the output (the last rank's part; a message's last 1/n) is never written;
- ``stale``: the first call of an op at a shape fills an output kept for it; every later call returns that first
  result again (a cache that is never refreshed);
- ``misroute``: the output's chunks (or a message's n parts) are delivered one place over;
- ``duplicate``: the first chunk is written twice, in its place and in the second's (which is missing);
- ``overrun``: the op also writes the output's first chunk past its end, into the next bytes of the same
  storage;
- ``reorder``: of two messages from the same peer in one call, each lands in the other's buffer;
- ``partial``: only the first half of each message (output) is delivered;
- ``wrong_reduction``: the ranks reduce with another op (sum where avg was asked, max where sum, min
  where max, max where min, sum where product);
- ``aliasing``: an out-of-place op (and a send) also writes its output's first elements into its input;
- ``group_rank``: the group's rank taken for the global one: the output's chunks (a message's n parts) placed by
  the global rank of the rank they belong to (mod n), not its rank in the group; the same on the world's group,
  whose ranks are the global ones, so only a group of other ranks (``COLLECTIVES_GROUPS=interleaved``) shows it.

A collective's fault is applied once its result is whole; a receive's when its data has arrived. A class that
cannot apply to an op (no input to alias for an in-place op, no reduction in a gather, one message with nothing
to reorder) leaves that op correct: docs/metrics.md says why for each.
"""

from __future__ import annotations

import contextlib

from suite.harness.plant.mode import FaultMode, Planting

from suite.common import faults
from suite.common.backends import c10d_name, check_planted_backend
from suite.common.switches import switch

FAULTS = faults.BACKEND_FAULTS


@contextlib.contextmanager
def armed(fault: str | None, planting: Planting):
    """The ops issued inside, on any group, are faulty with ``fault`` (None: as they are): one armed call
    (suite/harness/plant/mode.py; ``planting``: what its faults keep from one armed call to the next)."""
    if fault is None:
        yield
        return
    with FaultMode(fault, planting):
        yield


def planted_in(case, env=None) -> tuple[str | None, str | None]:
    """(the fault SUITE_INJECT_BACKEND arms for ``case``'s calls, what its record's ``planted_fault`` says); (None,
    None) when the switch is off."""
    inj = switch("SUITE_INJECT_BACKEND", env)
    if inj is None:
        return None, None
    if faults.targets(inj.name, case):
        return inj.fault, f"backend {inj.fault}"
    return None, f"backend {inj.fault} (not armed for this case)"


def armed_call(fault: str | None, call, planting: Planting):
    """``call`` (a case's ``Buffers.call``) with its ops faulty with ``fault`` (None: ``call`` itself)."""
    if fault is None:
        return call

    def faulty(async_op: bool):
        with armed(fault, planting):
            return call(async_op)

    return faulty


def backend_for(backend: str, device_type: str, env=None) -> str:
    """The backend c10d starts the run's group on: ``backend``'s (under SUITE_INJECT_BACKEND Gloo, on CPU only: the
    faults are planted over it, not in it)."""
    if switch("SUITE_INJECT_BACKEND", env) is not None:
        check_planted_backend(backend, device_type, env)
    return c10d_name(backend)
