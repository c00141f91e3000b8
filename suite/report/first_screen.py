"""What every run's report opens with, before any number: the verdict (the terminal's ``# verdict:`` line,
suite/report/run_end.py), the backend(s), the world and its hosts, and every warning that changes how to read
the numbers -- a run that did not complete, ranks that outnumber their cores (in the whole run, or in the pass
of the cases that need more ranks than there are cores), the share of cases whose median
is uncertain by more than ±10%, other load on the machine during the run, an experiment that could not tell,
and the numbers of the headline that do not add up, with their cause (suite/report/add_up.py).
Each comes from the one place that decides it (run_end's verdict, the summary's rows, suite/system/cpu_load.py);
this module only gathers them. Reads records only; renders nothing (suite/report/render.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite import results
from suite.report import summary
from suite.report.add_up import add_up_rows
from suite.report.headline import Headline
from suite.report.run_end import stored_status, stored_verdict


@dataclass(frozen=True, kw_only=True)
class FirstScreen:
    verdict: str
    """``verdict: PASS: 439 cases, 0 wrong, 0 unchecked; exit status 0 (...)``, as the terminal said it."""
    passed: bool
    """The run completed with exit status 0."""
    world: str
    """``backend gloo on cpu; 4 ranks on 1 host (vm)``."""
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """(what, why it matters): each thing that changes how to read the numbers; empty when nothing does."""


def first_screen(run: dict, items: list[Headline]) -> FirstScreen:
    """The verdict, the world and the warnings of a stored run (``items``: its headlines, headline_items)."""
    recs = results.records(run)
    st = run.get("suite") or {}
    warnings = [
        *interrupted_rows(run, len(recs)),
        *summary.cpu_rows(run),
        *summary.idle_rows(run),
        *oversubscribed_rows(recs),
        *unstable_rows(recs),
        *(("load during the run", cause) for cause in summary.load_causes(run, load_only=True)),
        *((h.experiment, h.text.removeprefix(f"{h.experiment}: ")) for h in items if h.verdict == "inconclusive"),
        *add_up_rows(run, items),
    ]
    return FirstScreen(
        verdict=stored_verdict(run, items),
        passed=bool(st.get("complete")) and stored_status(run) == 0,
        world=summary.world_text(run, recs),
        warnings=warnings,
    )


def interrupted_rows(run: dict, n_kept: int) -> list[tuple[str, str]]:
    """One row for a run that did not complete: what ended it and what its numbers cover; none otherwise."""
    st = run.get("suite") or {}
    if st.get("complete"):
        return []
    signum = st.get("interrupted_by_signal")
    why = (
        f"interrupted by signal {signum}"
        if signum is not None
        else st.get("cause") or "the run did not complete (still going, or a rank failed)"
    )
    return [("PARTIAL", f"{why}: the {n_kept} cases kept are measured in full; the cases not reached are absent")]


def oversubscribed_rows(recs: list[dict]) -> list[tuple[str, str]]:
    """One row for the records of the oversubscribed pass (suite/launch/passes.py), naming their experiments and
    world, whose times the headline leaves out; none when the run had no such pass."""
    over = [r for r in recs if results.oversubscribed(r)]
    if not over:
        return []
    experiments = ", ".join(dict.fromkeys(str(r.get("experiment")) for r in over))
    worlds = "/".join(map(str, sorted({r.get("world_size") for r in over if isinstance(r.get("world_size"), int)})))
    note = results.OVERSUBSCRIBED_NOTE.removeprefix("OVERSUBSCRIBED pass: ")
    return [("OVERSUBSCRIBED pass", f"{len(over)} case(s) of {experiments} at {worlds} ranks: {note}")]


def unstable_rows(recs: list[dict]) -> list[tuple[str, str]]:
    """The share of cases whose median is uncertain by more than the summary's threshold (none when no case)."""
    unstable, widths = summary.unstable_cases(recs)
    if not unstable:
        return []
    return [
        (
            "unstable",
            f"{len(unstable)} of {len(widths)} cases uncertain by more than ±{summary.UNSTABLE_CI_PCT:z.0f}% "
            "(95% CI of the median): read their times as rough; the summary names the widest and what to do",
        )
    ]
