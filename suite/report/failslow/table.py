"""A fail-slow bench's scores as the reader sees them: per detector, all trials and each class's severity band
(the class's drawn range cut in two), each figure with its 95% interval; the confusion matrix as a picture
(true target against the target named first after the onset); a page (``failslow.html``) and its Markdown
(``failslow.md``) in the bench's folder, beside ``failslow.json``.

The columns: detection rate (= recall: the share of the injections slowing the step by 10% or more that were
flagged after their onset), precision, F1, localisation (of those found, the share named right), the median
time to detect from the onset, false alarms per hour of clean training, and apart the sensitivity: of the
injections below 10%, the share found and named right (neither missed nor found in the other columns); and the
clean trials whose flags the watch classed ``foreign load`` (a neighbour of the run's on its host: neither false
alarms nor found, score.py).
"""

from __future__ import annotations

import base64
import dataclasses
import html
from collections.abc import Sequence
from pathlib import Path

from suite.common.fileio import write_text_atomic
from suite.inject import registry
from suite.report.page import html_table, standalone_page

from . import score, trials

HEAD = [
    "detector", "trials", "injected / clean / void", "detection rate (recall)", "precision", "F1",
    "localisation", "time to detect (s)", "false alarms / h", "sensitivity (< 10%)", "foreign load (clean)",
]  # fmt: skip


def band(cls: str, severity: float) -> tuple[float, str]:
    """The severity band a trial falls in: its class's drawn range cut in two (below or above it: one more each);
    (its lower edge, its label)."""
    a, b = registry.discover()[cls].drawn if cls in registry.discover() else (severity, severity)
    mid = (a + b) / 2
    if severity < a:
        return float("-inf"), f"< {a:zg}"
    if severity > b:
        return b, f"> {b:zg}"
    return (a, f"{a:zg}-{mid:zg}") if severity < mid else (mid, f"{mid:zg}-{b:zg}")


def scores(stored: Sequence[dict], seed: int) -> dict:
    """One detector's scores over its stored trials: all of them, per class and severity band, the confusion."""
    scored = [t for t in (trials.from_stored(s) for s in stored) if t is not None]
    banded, labels = [], {}
    for t in scored:
        if t.truth is not None:
            edge, label = band(t.truth.cls, t.truth.severity)
            labels[(t.truth.cls, edge)] = f"{t.truth.cls} {label}"
            t = dataclasses.replace(t, truth=dataclasses.replace(t.truth, severity=edge))
        banded.append(t)
    return {
        "trials": len(stored),
        "void": len(stored) - len(scored),
        "all": score.score(scored, seed=seed).as_dict(),
        "by_class": {labels[k]: s.as_dict() for k, s in score.by_class(banded, seed=seed).items()},
        "confusion": score.confusion(scored),
    }


def estimate_text(e: dict, digits: int = 2) -> str:
    """An estimate as the tables show it: ``0.93 [0.81, 0.98]``; its value alone without an interval; ``-``."""
    if e["value"] is None:
        return "-"
    if e["lo"] is None:
        return f"{e['value']:z.{digits}f}"
    return f"{e['value']:z.{digits}f} [{e['lo']:z.{digits}f}, {e['hi']:z.{digits}f}]"


def _row(name: str, s: dict, trials_n: int, void: int | str) -> list[str]:
    injected = s["trials"] - s["clean"]
    weak = injected - s["positives"]
    est = estimate_text
    return [
        name, str(trials_n), f"{injected} / {s['clean']} / {void}", est(s["recall"]), est(s["precision"]), est(s["f1"]),
        est(s["localisation"]), est(s["time_to_detect_s"], 1), est(s["false_alarms_per_hour"], 1),
        f"{est(s['sensitivity'])} of {weak}" if weak else "-",
        f"{s.get('foreign_load_trials', 0)} of {s['clean']}" if s["clean"] else "-",
    ]  # fmt: skip


def rows(doc: dict) -> list[list[str]]:
    """The table's rows: per detector, all its trials, then each class's severity bands (with the clean trials)."""
    out = []
    for det, sc in doc["scores"].items():
        out.append(_row(f"{det}: all", sc["all"], sc["trials"], sc["void"]))
        out += [_row(f"{det}: {k}", s, s["trials"], "") for k, s in sc["by_class"].items()]
    return out


def markdown(doc: dict) -> str:
    head = "| " + " | ".join(HEAD) + " |\n|" + "---|" * len(HEAD) + "\n"
    return head + "".join("| " + " | ".join(r) + " |\n" for r in rows(doc))


def confusion_png(matrix: dict[str, dict[str, int]], title: str) -> bytes:
    """True target (rows) against the target named first after the onset (columns), each cell's trials."""
    import numpy as np  # here: matplotlib's import is most of a bench's start, and bad input needs none of it
    from matplotlib.figure import Figure

    from suite.report.plots import figure_png

    true = sorted(matrix) or ["(no trial scored)"]
    named = sorted({c for r in matrix.values() for c in r}) or ["nothing"]
    counts = np.array([[matrix.get(r, {}).get(c, 0) for c in named] for r in true], dtype=float)
    fig = Figure(figsize=(1.6 + 1.1 * max(len(named), 2), 1.2 + 0.5 * max(len(true), 2)))
    ax = fig.subplots()
    ax.imshow(counts, cmap="Blues", vmin=0, vmax=max(counts.max(), 1), aspect="auto")
    for i in range(len(true)):
        for j in range(len(named)):
            ax.text(j, i, f"{counts[i, j]:zg}", ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(named)), named, fontsize=8, rotation=30, ha="right")
    ax.set_yticks(range(len(true)), true, fontsize=8)
    ax.set_xlabel("named first after the onset")
    ax.set_ylabel("true target")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return figure_png(fig)


def write(out: Path, doc: dict) -> str:
    """``failslow.md``, ``failslow.html`` and one ``confusion-<detector>.png`` each; the Markdown table (returned,
    for the terminal)."""
    md = markdown(doc)
    cfg = doc["config"]
    said = f"{len(doc['trials'])} of {cfg['trials']} trial(s), seed {cfg['seed']}, classes {', '.join(cfg['classes'])}"
    said += "" if doc["complete"] else " (interrupted: the finished trials only)"
    imgs, parts = [], []
    for det, sc in doc["scores"].items():
        png = confusion_png(sc["confusion"], f"{det}: true target against named target")
        (out / f"confusion-{det}.png").write_bytes(png)
        imgs.append(f"![{det} confusion](confusion-{det}.png)")
        src = "data:image/png;base64," + base64.b64encode(png).decode()
        parts.append(f"<h2>{html.escape(det)}</h2><img alt='{det} confusion' src='{src}'>")
    write_text_atomic(out / "failslow.md", f"# Fail-slow bench\n\n{said}\n\n{md}\n" + "\n".join(imgs) + "\n")
    body = f"<h1>Fail-slow bench</h1><p>{html.escape(said)}</p>" + html_table(HEAD, rows(doc)) + "".join(parts)
    write_text_atomic(out / "failslow.html", standalone_page("Fail-slow bench", body))
    return (
        f"# {said}\n{md}# table: {out / 'failslow.md'}; page: {out / 'failslow.html'}; trials: {out / 'failslow.json'}"
    )


def trial_line(t: dict, k: int, n: int) -> str:
    """One finished trial on the terminal: what was injected, what the watch flagged."""
    what = "clean" if not t.get("inject") else f"{t['inject']}"
    if t.get("step_slowdown") is not None:
        what += f" (step {100 * t['step_slowdown']:+z.0f}%)"
    flagged = (
        ", ".join(
            f"{f['target']} at {f['raised_s']:z.1f} s" + (" (foreign load)" if f.get("class") == "foreign load" else "")
            for f in t.get("flags", [])
        )
        or "nothing"
    )
    tail = f"; void: {t['void']}" if t.get("void") else ""
    return f"# trial {k}/{n}: {what}: flagged {flagged}{tail}"
