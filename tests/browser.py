"""A page as a person opens it: headless Chromium in a 1400x1800 window, for the e2e tests of every page the
suite writes (the run's report, the comparison, the validation of the predictions).

``open_page`` loads a page and reports what the browser saw: every image and whether it decoded, script
errors, every request that left the page's folder (the network, or a file elsewhere: a report works offline,
from its folder) and where one element (the page's opening figure) lies against the viewport.
``assert_opens_on`` asserts all four at once. The probe is a script put first in a copy of the page, in the
page's folder so that its relative links still resolve; the page itself is not changed. Host names resolve
nowhere (``--host-resolver-rules``), so a request is recorded but never leaves the machine.

    @needs_chromium
    def test_my_page(tmp_path):
        check = assert_opens_on(page, tmp_path, "#headline-figure img")
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest

from suite.report.browser import FIRST_SCREEN, chromium, chromium_command

needs_chromium = pytest.mark.skipif(
    chromium() is None and os.environ.get("REQUIRE_BROWSER") != "1",
    reason="no chromium (CI installs it: .ci/setup.d/20-browser.sh)",
)
"""Skip without a browser, except where REQUIRE_BROWSER=1 (CI): there a missing one fails."""


_PROBE = """<script>(()=>{const errors=[],blocked=[];
addEventListener('error',e=>errors.push(String(e.message||'')),false);
document.addEventListener('securitypolicyviolation',e=>blocked.push(e.blockedURI));
addEventListener('load',()=>setTimeout(()=>{const here=location.href.replace(/[^/]*$/,'');
const im=[...document.images].map(i=>({alt:i.alt||i.src.slice(0,80),ok:i.complete&&i.naturalWidth>0}));
const loads=[...document.querySelectorAll('img,script[src],link[rel~=stylesheet],iframe,embed,object,source')]
  .map(e=>e.currentSrc||e.src||e.href||e.data||'');
const req=[...new Set(performance.getEntriesByType('resource').map(e=>e.name).concat(loads))]
  .filter(u=>u&&!u.startsWith('data:')&&!u.startsWith(here)).concat(blocked);
const el=document.querySelector(%s);const r=el&&el.getBoundingClientRect();
const boxes={};for(const s of %s){boxes[s]=[...document.querySelectorAll(s)].map(x=>x.getBoundingClientRect())
  .map(b=>({top:b.top,bottom:b.bottom}));}
const out=document.createElement('pre');out.id='__browser_probe';out.style.display='none';
out.textContent=JSON.stringify({images:im,errors,requests:req,height:innerHeight,width:innerWidth,
  figure:r&&{top:r.top,bottom:r.bottom,left:r.left,right:r.right},boxes});
document.body.appendChild(out);},0));})();</script>"""


@dataclass(frozen=True)
class PageCheck:
    """What the browser saw of a page."""

    images: list[dict]
    """Every <img>: its alt text (or the start of its src) and whether it decoded."""
    errors: list[str]
    """Script errors (uncaught exceptions), as the browser gave them."""
    requests: list[str]
    """Every URL fetched from outside the page's folder (the resources the browser timed, and the URLs of the
    page's images, scripts, style sheets and frames), or blocked by the page's content security policy."""
    height: int
    """The viewport's height (CSS pixels): the window less its frame."""
    width: int
    figure: dict | None
    """The selected element's box against the viewport (top, bottom, left, right); None: no such element."""

    boxes: dict
    """Per selector asked for (``open_page``'s ``also``): the box (top, bottom) of every element it matches."""

    @property
    def broken(self) -> list[str]:
        return [i["alt"] for i in self.images if not i["ok"]]


def run_chromium(page: Path, tmp_path: Path, *switches: str, window: tuple[int, int] = FIRST_SCREEN):
    """Headless Chromium on ``page`` in a ``window`` with ``switches`` (``--dump-dom``, ``--screenshot=PATH``),
    a profile under ``tmp_path``, no background traffic and no host name resolving; the CompletedProcess."""
    exe = chromium()
    assert exe is not None, "REQUIRE_BROWSER=1 but chromium is not installed"
    cmd = chromium_command(exe, page, tmp_path / "browser-profile", *switches, window=window)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def open_page(
    page: Path, tmp_path: Path, selector: str = "img", *, window: tuple[int, int] = FIRST_SCREEN, also=()
) -> PageCheck:
    """Load ``page`` in headless Chromium in a ``window`` and return the PageCheck of it, ``selector`` (CSS)
    naming the element whose place is measured (the first that matches), ``also`` more selectors whose every
    match is measured (PageCheck.boxes)."""
    text = page.read_text()
    probe = _PROBE % (json.dumps(selector), json.dumps(list(also)))
    m = re.search(r"<head[^>]*>", text, re.I)
    text = text[: m.end()] + probe + text[m.end() :] if m else probe + text
    copy = page.parent / f".browser-probe-{uuid.uuid4().hex[:8]}-{page.name}"
    copy.write_text(text)
    try:
        r = run_chromium(copy, tmp_path, "--dump-dom", window=window)
    finally:
        copy.unlink()
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="__browser_probe"[^>]*>(.*?)</pre>', r.stdout, re.S)
    assert m, "the probe did not run (a script policy without 'unsafe-inline'?): " + r.stderr[-1000:]
    return PageCheck(**json.loads(unescape(m.group(1))))


def assert_opens_on(page: Path, tmp_path: Path, selector: str) -> PageCheck:
    """The page as a person opens it: ``selector``'s element lies wholly inside the first screen of a
    FIRST_SCREEN window, every image decodes, no script fails and nothing is fetched from outside its folder."""
    c = open_page(page, tmp_path, selector)
    assert c.images and not c.broken, f"images that did not decode: {c.broken}"
    assert not c.errors, f"script errors: {c.errors}"
    assert not c.requests, f"requests outside the page's folder: {c.requests}"
    assert c.figure is not None, f"no element {selector!r} on the page"
    assert 0 < c.height <= FIRST_SCREEN[1], c.height
    assert 0 <= c.figure["top"] < c.figure["bottom"] <= c.height, (selector, c.figure, c.height)
    assert c.figure["right"] <= c.width + 1, (selector, c.figure, c.width)
    return c


SMALL_SCREEN = (1280, 900)
"""A laptop's window: what a page must say before any scrolling (its verdict, world and warnings)."""


def assert_on_small_screen(page: Path, tmp_path: Path, selectors: list[str]) -> PageCheck:
    """In a SMALL_SCREEN window, every element each of ``selectors`` matches (at least one each) lies wholly
    inside the first viewport."""
    c = open_page(page, tmp_path, selectors[0], window=SMALL_SCREEN, also=selectors)
    assert 0 < c.height <= SMALL_SCREEN[1], c.height
    for sel in selectors:
        assert c.boxes[sel], f"no element {sel!r} on the page"
        for b in c.boxes[sel]:
            assert 0 <= b["top"] < b["bottom"] <= c.height, (sel, b, c.height)
    return c
