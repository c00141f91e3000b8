"""A run's passes. The main pass runs every case at the chosen world; a case that needs more ranks than that (a 2-D
mesh needs 4) is skipped there, its skip's record giving the world it needs (``needs_ranks``, from the reason its
case gave: suite.errors.NeedsRanks). A second pass then runs those cases, and only those, at the world they need,
for their checks: its records join the main pass's bench.json. Every record says its ``run_pass``; those of a second
pass whose ranks outnumber this host's usable cores also ``oversubscribed`` (the headline, the fits and the compare
gate leave those out: suite.results.communication_records). Node 0 of a one-node run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from suite import results
from suite.common.fileio import write_json_atomic
from suite.common.failures import EXIT_OK
from suite.system import cpu_load

MAIN, OVERSUBSCRIBED, WIDER = "main", "oversubscribed", "wider"
"""The passes' names: the second is ``oversubscribed`` where its ranks outnumber the usable cores."""
SECOND_DIR = "second-pass"
"""Where the second pass writes its own bench.json, tables and failure notes, inside the run's directory."""
MAX_SECOND_WORLD = 8
"""The most ranks a second pass starts on this host (a case needing more stays skipped)."""
SECOND_BUDGET_S = 0.25
"""The second pass's sample budget per case, seconds (BUDGET_S, at most): its times are not headline figures."""


def wider_cases(skipped: list[dict], world_size: int) -> tuple[int, list[str]]:
    """The world a second pass needs and the cases (pytest node ids) it runs: those skipped because they need more
    ranks than ``world_size``, up to MAX_SECOND_WORLD; (0, []) when there are none."""
    need = {}
    for s in skipped:
        ranks = s.get("needs_ranks")
        if isinstance(ranks, int) and world_size < ranks <= MAX_SECOND_WORLD:
            need[s["case"]] = ranks
    return (max(need.values()), list(need)) if need else (0, [])


def mark(run: dict, name: str) -> None:
    """Stamp each record of ``run`` with its pass; those of the OVERSUBSCRIBED pass also ``oversubscribed``. (A main
    pass the user oversubscribed, NPROC above the cores, is not marked: it warns, and its report says so.)"""
    for rec in results.records(run):
        rec["run_pass"] = name
        if name == OVERSUBSCRIBED:
            rec["oversubscribed"] = True


def mark_main(run_dir: Path) -> None:
    """Stamp the main pass's records in ``<run>/bench.json`` (``mark``); leaves a file it cannot read or write as it
    is."""
    path = run_dir / "bench.json"
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # stamp_status names it
    mark(run, MAIN)
    run.setdefault("suite", {}).setdefault("passes", [_entry(run, MAIN, [])])
    try:
        write_json_atomic(path, run)
    except OSError:
        return  # unchanged: stamp_status's rewrite meets the same error and names it (EXIT_IO), as without passes


def _entry(run: dict, name: str, cases: list[str]) -> dict:
    su = run.get("suite") or {}
    recs = results.records(run)
    return {
        "name": name,
        "world_size": recs[0]["world_size"] if recs else None,
        "oversubscribed": results.ranks_oversubscribed(run),
        "n_records": len(recs),
        "exitstatus": su.get("exitstatus"),
        **({"cases": cases, "dir": SECOND_DIR} if name != MAIN else {}),
    }


def second_pass(run_dir: Path, run_id: str, lay: dict, start: Callable) -> tuple[int, int | None]:
    """Run the cases the main pass skipped for want of ranks at the world they need (``start(lay, node_ids,
    suite_opts)``: run_ranks' (rc, signum, first) of the ranks it started) and merge their records into the run's
    bench.json; (EXIT_OK, None) when there are none. Its status and the signal it was interrupted by, if any."""
    from suite.launch.supervise import final_status
    from suite.launch.world import usable_here

    main = json.loads((run_dir / "bench.json").read_text())
    world, cases = wider_cases((main.get("suite") or {}).get("skipped") or [], lay["world_size"])
    if not cases:
        return EXIT_OK, None
    sub = run_dir / SECOND_DIR
    sub.mkdir(exist_ok=True)
    cfg = json.loads((run_dir / "config.json").read_text())
    if cfg.get("budget_s"):
        cfg["budget_s"] = min(cfg["budget_s"], SECOND_BUDGET_S)
    write_json_atomic(sub / "config.json", cfg)
    usable = usable_here()
    over = f", OVERSUBSCRIBED on {cpu_load.cores(usable, 'usable ')}" if usable and world > usable else ""
    print(f"# second pass: {len(cases)} case(s) that need {world} ranks, on {world} ranks{over}", flush=True)
    opts = ["--results-dir", str(sub), "--run-id", f"{run_id}-{SECOND_DIR}", "--suite-config", str(sub / "config.json")]
    rc, signum, first = start(dict(lay, nproc=world, world_size=world), cases, opts)
    status = final_status(rc, signum, sub, first)
    if (sub / "bench.json").exists():
        merge(run_dir, sub, cases)
    return status, signum


def merge(run_dir: Path, sub: Path, cases: list[str]) -> None:
    """Add the second pass's records (``sub``/bench.json) to the run's, stamped (``mark``); its skips and failures
    replace the main pass's of the cases it ran; its tables follow the main pass's in tables.txt, headed."""
    path = run_dir / "bench.json"
    main, extra = json.loads(path.read_text()), json.loads((sub / "bench.json").read_text())
    name = OVERSUBSCRIBED if results.ranks_oversubscribed(extra) else WIDER
    mark(extra, name)
    su, esu = main.setdefault("suite", {}), extra.get("suite") or {}
    main["benchmarks"] = main.get("benchmarks", []) + extra.get("benchmarks", [])
    su["skipped"] = [s for s in su.get("skipped", []) if s.get("case") not in cases] + esu.get("skipped", [])
    su["failed"] = su.get("failed", []) + esu.get("failed", [])
    su["n_records"] = len(results.records(main))
    su["passes"] = [p for p in su.get("passes", []) if p["name"] == MAIN] + [_entry(extra, name, cases)]
    write_json_atomic(path, main)
    tables = sub / results.TABLES_FILE
    if tables.is_file():
        head = heading(name, _entry(extra, name, cases))
        with open(run_dir / results.TABLES_FILE, "a") as fh:
            fh.write(f"\n# {head}\n{tables.read_text()}")


def heading(name: str, entry: dict) -> str:
    """The line that heads a second pass's tables."""
    world = entry.get("world_size")
    if name == OVERSUBSCRIBED:
        return f"second pass at {world} ranks, {results.OVERSUBSCRIBED_NOTE}"
    return f"second pass at {world} ranks, for the cases that need more ranks than the main pass had"
