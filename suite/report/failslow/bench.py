"""``make failslow-bench``: N short training runs with the online watch on, each with one seeded injection or
none, scored after each run against the truth it never saw; optionally the doctor with the same injection.

    python -m suite.report.failslow.bench --trials N --seed S --classes pause,slow [--clean 0.25] \\
        [--run-s 36] [--nproc 2] [--results-root results] [--run-id ID] \\
        --trial-args "<the launcher's arguments of one trial>" [--doctor-args "<the doctor run's>"] \\
        [--compose-nodes N --nproc-per-node P]

``--compose-nodes N`` (N >= 2) runs every trial on the compose simulation instead, N containers of P ranks
(compose.py); the trial and doctor arguments are then the simulation's knobs, ``KEY=VALUE`` words.

The launcher arguments name the experiment and case (mk/failslow.mk holds them: the suite's core names no
experiment). Every trial's plan is drawn and checked before the first run starts (trials.py): bad input is one
line on stderr and status 2. After each trial ``<run>/failslow.json`` is rewritten atomically (its trials and
the scores so far), so a Ctrl-C keeps every finished trial; the table and the confusion-matrix picture follow
(table.py). ``--rescore <run>`` reads its kept trials again and writes the scores, table and picture anew.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from suite.common.fileio import write_json_atomic
from suite.errors import ConfigError

from . import compose, table, trials

FILE = "failslow.json"
DETECTORS = ("watch", "probes")
"""The detectors scored: the online watch, and the doctor's probes (``--doctor-args``) where asked for."""
ROOT = Path(__file__).resolve().parents[3]


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m suite.report.failslow.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--trials", default="8")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--classes", default="pause,slow", help="class specs, comma-separated: INJECT's syntax")
    ap.add_argument("--clean", default="0.25", help="the share of clean trials")
    ap.add_argument("--cycle", default="0", help="1: the trials take the class specs in turn (none: clean)")
    ap.add_argument("--run-s", default="36", help="a trial's expected length, seconds (INJECT_RUN_S)")
    ap.add_argument("--nproc", default="2")
    ap.add_argument("--results-root", default="results")
    ap.add_argument("--run-id", default="")
    ap.add_argument("--trial-args", default="")
    ap.add_argument("--doctor-args", default="", help="empty: the doctor is not scored")
    ap.add_argument("--compose-nodes", default="0", help="N >= 2: the trials run on the compose simulation")
    ap.add_argument("--nproc-per-node", default="2", help="the ranks of each node of the compose simulation")
    ap.add_argument("--rescore", default="", help="a bench run folder: its trials read again, scored and tabled")
    return ap.parse_args(argv)


def _number(text: str, knob: str, kind=float):
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{knob}={text!r}: {'a whole number' if kind is int else 'a number'}") from None


def configure(a: argparse.Namespace) -> dict:
    """The bench's settings and its drawn trials; ConfigError (one line) on any bad input."""
    n = _number(a.trials, "TRIALS", int)
    seed = _number(a.seed, "SEED", int)
    sim = compose.simulation(a.compose_nodes, a.nproc_per_node)
    nproc = sim.world if sim else _number(a.nproc, "NPROC", int)
    run_s = _number(a.run_s, "FAILSLOW_RUN_S")
    if seed < 0:
        raise ConfigError(f"SEED={seed}: a whole number >= 0")
    if nproc < 2:
        raise ConfigError(f"NPROC={a.nproc}: a fail-slow trial needs 2 or more ranks (one slow beside its peers)")
    if not a.trial_args.strip():
        raise ConfigError("--trial-args is empty: name the watched training case (mk/failslow.mk)")
    specs = [s.strip() for s in a.classes.split(",") if s.strip()]
    if a.cycle not in ("0", "1"):
        raise ConfigError(f"FAILSLOW_CYCLE={a.cycle!r}: 0 (drawn) or 1 (the class specs in turn)")
    clean = _number(a.clean, "FAILSLOW_CLEAN")
    if sim:  # the simulation's knobs, checked before the first trial
        compose.knobs(a.trial_args, "--trial-args")
        compose.knobs(a.doctor_args, "--doctor-args")
    planned = trials.draw(n, seed, specs, clean, nproc, run_s, cycle=a.cycle == "1", compose=sim is not None)
    return {
        "trials": n, "seed": seed, "classes": specs, "clean_share": clean, "cycle": a.cycle == "1", "run_s": run_s,
        "nproc": nproc, "compose": None if sim is None else {"nnodes": sim.nnodes, "per_node": sim.per_node},
        "trial_args": a.trial_args, "doctor_args": a.doctor_args, "planned": [p.as_dict() for p in planned],
    }  # fmt: skip


def _env(inject: str | None, seed: int, run_s: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("INJECT", "SEED", "INJECT_RUN_S")}
    if inject:
        env |= {"INJECT": inject, "SEED": str(seed), "INJECT_RUN_S": f"{run_s:zg}"}
    return env


def _launch(folder: Path, run_id: str, args: str, cfg: dict, env: dict) -> tuple[Path, int, float]:
    """One run of the launcher (or of the compose simulation), its output in ``<folder>/<run_id>.log``: (its run
    folder, its status, seconds)."""
    if cfg.get("compose"):
        cmd, env = compose.launch(compose.Sim(**cfg["compose"]), folder, run_id, args, env)
    else:
        cmd = [sys.executable, "-m", "suite.launch", "--nproc", str(cfg["nproc"]), "--backend", "gloo"]
        cmd += ["--device", "cpu", "--results-root", str(folder), "--run-id", run_id, *shlex.split(args)]
    t = time.monotonic()
    with open(folder / f"{run_id}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:  # the launcher got the Ctrl-C too (one process group): let it end its ranks
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
    return folder / run_id, rc, time.monotonic() - t


def _doctor_trial(folder: Path, p: trials.Planned, cfg: dict, watched: dict) -> dict:
    """The doctor run with the trial's injection active from its start (onset 0, to the end), read after it."""
    inject = None
    if p.inject:
        inject = f"{p.cls}:{p.target}:0:{p.severity:zg}:rest"
    run, rc, took = _launch(folder, f"d{p.index:03d}", cfg["doctor_args"], cfg, _env(inject, p.seed, 1e6))
    return trials.read_doctor(run, p, rc, took, watched)


def run_trials(out: Path, cfg: dict, say=print) -> tuple[list[dict], bool]:
    """Every planned trial in turn, stored after each; (the stored trials, whether all of them ran)."""
    done: list[dict] = []
    folder = out / "trials"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for d in cfg["planned"]:
            p = trials.Planned(**d)
            run, rc, _ = _launch(
                folder, f"t{p.index:03d}", cfg["trial_args"], cfg, _env(p.inject, p.seed, cfg["run_s"])
            )
            stored = {"watch": _read(run, p, rc)}
            if cfg["doctor_args"]:
                stored["probes"] = _doctor_trial(folder, p, cfg, stored["watch"])
            done.append(stored)
            save(out, cfg, done, complete=False)
            say(table.trial_line(stored["watch"], len(done), len(cfg["planned"])))
    except KeyboardInterrupt:
        say(f"# failslow-bench: interrupted; {len(done)} finished trial(s) kept in {out / FILE}")
        return done, False
    return done, True


def _read(run: Path, p: trials.Planned, rc: int) -> dict:
    if rc != 0:
        return {**p.as_dict(), "run": run.name, "void": f"the run exited {rc} (its log: {run.name}.log)", "flags": []}
    try:
        return trials.read(run, p)
    except (OSError, ValueError, KeyError) as e:
        return {**p.as_dict(), "run": run.name, "void": f"its records could not be read: {e}", "flags": []}


def reread(out: Path, stored: dict) -> dict:
    """A stored trial read again from its run folder where the run is kept and ended well (the scores of the
    code at hand), else as stored."""
    w = stored["watch"]
    run = out / "trials" / str(w.get("run"))
    if str(w.get("void") or "").startswith("the run exited") or not (run / "bench.json").is_file():
        return stored
    fields = {k: w[k] for k in trials.Planned.__dataclass_fields__}
    if w.get("inject"):  # the planned onset: the stored one is the trial's own clock's
        fields["onset_s"] = float(w["inject"].split(":")[2])
    return {**stored, "watch": _read(run, trials.Planned(**fields), 0)}


def save(out: Path, cfg: dict, done: list[dict], *, complete: bool) -> dict:
    """``<out>/failslow.json``: the settings, the trials and every detector's scores, written atomically."""
    doc = {"config": cfg, "complete": complete, "trials": done}
    doc["scores"] = {
        d: table.scores([t[d] for t in done if d in t], cfg["seed"]) for d in DETECTORS if any(d in t for t in done)
    }
    write_json_atomic(out / FILE, doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    if a.rescore:
        out = Path(a.rescore)
        doc = json.loads((out / FILE).read_text())
        doc = save(out, doc["config"], [reread(out, t) for t in doc["trials"]], complete=doc["complete"])
        print(table.write(out, doc))
        return 0
    try:
        cfg = configure(a)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_id = a.run_id or "failslow-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = Path(a.results_root) / run_id
    out.mkdir(parents=True, exist_ok=True)
    print(f"# failslow-bench: {cfg['trials']} trial(s), seed {cfg['seed']}, classes {','.join(cfg['classes'])}: {out}")
    done, complete = run_trials(out, cfg)
    doc = save(out, cfg, done, complete=complete)
    print(table.write(out, doc))
    return 0 if complete else 130


if __name__ == "__main__":
    sys.exit(main())
