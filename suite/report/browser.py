"""A stored page as a person opens it: headless Chromium on one page in a 1400x1800 window, offline.

``python -m suite.report screenshot RUN`` keeps a picture of a report's first screen (the README's image is
one); the e2e tests load every page the suite writes through the same command line (tests/browser.py).
Host names resolve nowhere (``--host-resolver-rules``), so a page that would fetch something never leaves
the machine.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FIRST_SCREEN = (1400, 1800)
"""The window a person reads a page's first screen in (width, height, CSS pixels)."""


def chromium() -> str | None:
    """The Chromium (or Chrome) on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium_command(
    exe: str, page: Path, profile: Path, *switches: str, window: tuple[int, int] = FIRST_SCREEN
) -> list[str]:
    """Headless ``exe`` on ``page`` in a ``window`` with ``switches`` (``--dump-dom``, ``--screenshot=PATH``),
    its profile in ``profile``, no background traffic and no host name resolving."""
    return [
        exe,
        "--headless",
        f"--window-size={window[0]},{window[1]}",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *switches,
        page.resolve().as_uri(),
    ]


def screenshot(page: Path, out: Path, window: tuple[int, int] = FIRST_SCREEN) -> Path:
    """A PNG of ``page``'s first screen at ``out``; RuntimeError (its one-line reason) without a browser or
    when the browser fails."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("no chromium, chromium-browser or google-chrome on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="suite-browser-") as profile:
        cmd = chromium_command(exe, page, Path(profile), f"--screenshot={out.resolve()}", window=window)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    if r.returncode != 0 or not out.is_file():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{exe} exited with status {r.returncode}: {last}")
    return out
