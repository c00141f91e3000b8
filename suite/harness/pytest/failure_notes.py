"""Failure notes: what a rank leaves when a case raised something other than pytest's fail or skip: its
journal's dump at once (suite/harness/journal/__init__.py), a failure record for the launcher
(suite/common/failures.py) and the session stopped."""

from __future__ import annotations

import sys

import pytest

from suite.harness.pytest.run_state import rank_from_env


def is_distributed_failure(exc: BaseException) -> bool:
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc)
    # Only phrases of a lost or stuck peer: "ProcessGroupGloo does not support ..." is a local error.
    return any(
        k in text
        for k in (
            "Connection closed by peer",
            "Connection reset by peer",
            "Timed out waiting",
            "Socket Timeout",
            "Broken pipe",
            "mismatch between collectives",
            "ncclRemoteError",
            "Watchdog caught collective operation timeout",
        )
    )


def dump_journal(exc: BaseException | None) -> None:
    """The call phase raised ``exc`` (None: it did not): the journal, where there is one, is dumped now."""
    j = sys.modules.get("suite.harness.journal")
    if exc is not None and j is not None and j.current() is not None:
        # an interrupt (Ctrl-C, torchrun passing on SIGINT) is no failure, and no hang: nothing to dump
        if not isinstance(exc, (pytest.fail.Exception, pytest.skip.Exception, KeyboardInterrupt)):
            j.current().exc = exc
            j.current().dump(f"this rank failed: {type(exc).__name__}: {str(exc)[:300]}", failed=True)


def stop_the_session(item, call, rep) -> None:
    """A failed report of a distributed case: unless pytest's fail or skip, recorded and the session stopped."""
    if call.excinfo is None or not rep.failed or "dist_ctx" not in getattr(item, "fixturenames", ()):
        return
    # pytest.fail/skip are raised by every rank alike (n_wrong is global, probes agree; the
    # harness's CaseSkipped/CaseFailed reach here as pytest's),
    # so the ranks stay in step. Any other exception may have hit this rank alone while
    # the others wait in a collective: continuing would pair collectives of different
    # cases. End the session instead; the launcher reports the cause.
    if call.excinfo.errisinstance((pytest.fail.Exception, pytest.skip.Exception)):
        return
    exc = call.excinfo.value
    kind = getattr(exc, "failure_kind", None) or ("peer_failure" if is_distributed_failure(exc) else "rank_error")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    cause = f"{type(exc).__name__} in {item.nodeid}: {first}"
    from suite.common.failures import record_failure

    j = sys.modules.get("suite.harness.journal")
    if j is not None and j.current() is not None and j.current().exc is None:
        j.current().exc = exc  # a failure outside the call phase: its dump shows where it was raised
    record_failure(item.config.option.results_dir, rank_from_env(), cause, kind=kind)
    item.session.shouldstop = f"rank {rank_from_env()} stopped the run: {cause}"
