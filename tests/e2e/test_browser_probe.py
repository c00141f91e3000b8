"""The browser check of every page (tests/browser.py) is not blind: on a page with a figure below the fold, an
image that is not there, a script error and requests to the network and to a file outside the page's folder,
it reports each; on a sound page it reports nothing, and it asserts what a person sees first."""

from __future__ import annotations

import base64

import pytest

from tests.browser import FIRST_SCREEN, assert_on_small_screen, assert_opens_on, needs_chromium, open_page

# a 1x1 PNG, inline: an image that decodes without a file
DOT = (
    "data:image/png;base64,"
    + base64.b64encode(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
        )
    ).decode()
)


def _page(tmp_path, body: str):
    d = tmp_path / "site"
    d.mkdir(exist_ok=True)
    (d / "here.png").write_bytes(base64.b64decode(DOT.split(",", 1)[1]))
    p = d / "index.html"
    p.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>")
    return p


@needs_chromium
def test_the_probe_sees_a_sound_page_and_every_fault(tmp_path):
    sound = _page(tmp_path, f"<figure id='top'><img alt='a' src='{DOT}' width=600 height=400></figure>")
    c = assert_opens_on(sound, tmp_path, "#top img")
    assert c.figure["bottom"] == pytest.approx(c.figure["top"] + 400) and c.height <= FIRST_SCREEN[1]

    (tmp_path / "elsewhere.png").write_bytes(base64.b64decode(DOT.split(",", 1)[1]))  # decodes, but not its folder
    faulty = _page(
        tmp_path,
        "<img alt='local' src='here.png'>"  # beside the page: allowed
        "<div style='height:2000px'></div>"
        f"<figure id='low'><img alt='low' src='{DOT}' width=600 height=400></figure>"
        "<img alt='gone' src='missing.png'><img alt='remote' src='https://example.invalid/x.png'>"
        "<img alt='outside' src='../elsewhere.png'><script>undefined_function()</script>",
    )
    c = open_page(faulty, tmp_path, "#low img")
    assert sorted(c.broken) == ["gone", "remote"]
    assert len(c.errors) == 1 and "undefined_function" in c.errors[0]
    assert any("example.invalid" in u for u in c.requests) and any("elsewhere.png" in u for u in c.requests)
    assert not any(u.endswith("/site/here.png") for u in c.requests)
    assert c.figure["top"] > c.height  # below the first screen
    with pytest.raises(AssertionError, match="did not decode"):
        assert_opens_on(faulty, tmp_path, "#low img")
    # a page that blocks loads by its policy: the blocked request counts too
    strict = _page(tmp_path, "")
    strict.write_text(
        "<!doctype html><html><head><meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "img-src data:; script-src 'unsafe-inline'\"></head><body>"
        "<img alt='remote' src='https://example.invalid/y.png'></body></html>"
    )
    assert any("example.invalid" in u for u in open_page(strict, tmp_path, "img").requests)


@needs_chromium
def test_the_small_screen_check_measures_every_match(tmp_path):
    """Each match of a selector is measured: a second warning below a laptop's first screen fails the check."""
    page = _page(
        tmp_path,
        f"<p id='v'>verdict</p><img alt='a' src='{DOT}'><ul><li class='w'>one</li></ul>"
        "<div style='height:1000px'></div><ul><li class='w'>two</li></ul>",
    )
    c = open_page(page, tmp_path, "#v", also=["#v", ".w"])
    assert len(c.boxes[".w"]) == 2 and c.boxes[".w"][0]["bottom"] < 900 < c.boxes[".w"][1]["top"]
    assert_on_small_screen(page, tmp_path, ["#v"])
    with pytest.raises(AssertionError, match="'.w'"):
        assert_on_small_screen(page, tmp_path, ["#v", ".w"])
    with pytest.raises(AssertionError, match="no element"):
        assert_on_small_screen(page, tmp_path, ["#v", "#absent"])
