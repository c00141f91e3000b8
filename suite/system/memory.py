"""This process's resident-set high-water mark from ``/proc/self/status`` (VmHWM, VmRSS) and its
reset through ``/proc/self/clear_refs`` (proc(5))."""

from __future__ import annotations

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_SLACK_BYTES = 8 * 2**20
"""After a reset the high-water mark equals the resident size, give or take what Python allocates
between the write and the read; more than this means the reset did not happen."""


def _status_bytes(field: str) -> int | None:
    try:
        with open(_STATUS) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def vmhwm_bytes() -> int | None:
    return _status_bytes("VmHWM")


def reset_vmhwm() -> bool:
    """Reset the process's peak RSS to its current RSS; True only if the reset took effect.

    Some kernels and sandboxes accept the write to ``clear_refs`` and ignore it (seen in CI's
    Docker run: the peak stayed at the process's earlier 0.9 GB). A peak that is still above the
    resident size after the write is not the region's own, so the caller must say so."""
    try:
        with open(_CLEAR_REFS, "w") as fh:
            fh.write("5")
    except OSError:
        return False
    hwm, rss = vmhwm_bytes(), _status_bytes("VmRSS")
    return hwm is not None and rss is not None and hwm <= rss + _RESET_SLACK_BYTES
