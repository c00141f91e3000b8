"""What every page the suite writes shares: its style, its policy (it loads nothing: figures inline), the
load check a headless browser reads (tests/e2e/test_report.py), HTML tables, a page of its own beside a run's
report, and the box a page opens with (its verdict, what ran where, and every warning)."""

from __future__ import annotations

import html

CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#f3f3f3}pre{background:#f7f7f7;padding:0.6em;overflow-x:auto;font-size:11px}
img{max-width:100%;border:1px solid #eee;margin:0.4em 0}.note{color:#555;font-size:13px}
#imgcheck{color:#888;font-size:11px}h2{border-bottom:1px solid #ddd}
#headline ul{margin:0.3em 0 0.6em;padding-left:1.2em}#headline li{margin:0.15em 0}
figure{margin:0.4em 0 1em}figcaption,.caption{color:#444;font-size:13px}
#glance{display:flex;gap:1.2em;align-items:flex-start}#glance td{white-space:nowrap}
#glance figure{flex:0 1 auto;margin:0}
#first-screen{border:1px solid #ccc;padding:0.3em 0.8em;margin:0.4em 0 0.8em}#first-screen p{margin:0.25em 0}
#verdict{font-size:17px}.verdict-pass{color:#14632b}.verdict-fail{color:#a11}
#warnings{margin:0.2em 0;padding-left:1.2em}.warning{color:#8a4b00}"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
"""The report loads nothing: every figure is in the page (data: URIs), so it works offline from its folder."""

# Marks the page once every image has decoded (and records script errors, loads the page's policy blocked,
# resources fetched and where the headline figure ends), so a headless browser can confirm the report
# renders, offline, with its answer on the first screen (tests/e2e/test_report.py).
CHECK_JS = """window.__errors=[];window.__blocked=[];
window.addEventListener('error',e=>window.__errors.push(String(e.message)));
document.addEventListener('securitypolicyviolation',e=>window.__blocked.push(e.blockedURI));
window.addEventListener('load',()=>{const im=[...document.images];
const bad=im.filter(i=>!(i.complete&&i.naturalWidth>0)).map(i=>i.alt);const el=document.getElementById('imgcheck');
const fetched=performance.getEntriesByType('resource').filter(e=>!e.name.startsWith('data:'));
const fig=document.querySelector('#headline-figure img');
el.dataset.total=im.length;el.dataset.bad=bad.length;el.dataset.errors=window.__errors.length;
el.dataset.requests=fetched.length+window.__blocked.length;el.dataset.height=window.innerHeight;
if(fig){el.dataset.fold=Math.ceil(fig.getBoundingClientRect().bottom);}
el.textContent=`images rendered: ${im.length-bad.length}/${im.length}`
  +(bad.length?' missing: '+bad.join(', '):'');});"""


def html_table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def screen_html(verdict: str, passed: bool, world: str, warnings: list[tuple[str, str]]) -> str:
    """The box a page opens with: the verdict, the backend and world, each warning (or that there is none)."""
    e = html.escape
    warned = (
        "<ul id='warnings'>" + "".join(f"<li class='warning'><b>{e(k)}</b>: {e(v)}</li>" for k, v in warnings) + "</ul>"
        if warnings
        else "<p id='warnings' class='note'>no warning: nothing recorded changes how to read these numbers</p>"
    )
    cls = "verdict-pass" if passed else "verdict-fail"
    return (
        f"<div id='first-screen'><p id='verdict' class='{cls}'><b>{e(verdict)}</b></p>"
        f"<p id='world'>{e(world)}</p>{warned}</div>"
    )


def screen_markdown(verdict: str, world: str, warnings: list[tuple[str, str]]) -> list[str]:
    """The Markdown of ``screen_html``: the verdict in bold, the world, one line per warning."""
    return [f"**{verdict}**", "", world, "", *(f"- **warning: {k}**: {v}" for k, v in warnings), ""]


def standalone_page(title: str, body: str) -> str:
    """A page of its own beside a run's report (the validation of the predictions): the report's style, its
    policy (it loads nothing: figures inline) and its load check."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' "
        f'content="{CSP}"><title>{html.escape(title)}</title><style>{CSS}</style><script>{CHECK_JS}</script>'
        f"</head><body>{body}<p id='imgcheck'></p></body></html>"
    )
