"""``make validate-what-if``'s plan and its tables (suite/postmortem/replay/validate.py), without running a case:
the runs it would start read from their logs with MAKE=echo (each run's command line) and PY=echo (the table's)."""

from __future__ import annotations

import re

import pytest

from experiments.sharded import user_model
from experiments.sharded.settings import STRATEGIES, ShardedSettings
from tests.conftest import make


def _plan(tmp_path, *knobs: str) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The runs ``make validate-what-if KNOBS`` starts (name -> its command line's VAR=value) and the table's
    command line."""
    r = make("-s", "validate-what-if", f"RESULTS={tmp_path}", "MAKE=echo", "PY=echo", *knobs)
    assert r.returncode == 0, r.stderr
    runs = {}
    for log in tmp_path.glob("*.log"):
        line = log.read_text().strip()  # "[options] <target> VAR=value ...", a value (K's) may hold spaces
        target = re.match(r"(.*?) [A-Z_]+=", line)[1].split()[-1]
        runs[log.stem.rsplit("-", 1)[-1]] = dict(re.findall(r"([A-Z_]+)=(.*?)(?= [A-Z_]+=|$)", line), target=target)
    return runs, r.stdout.split()


@pytest.mark.parametrize("nodes", [2, 3])
def test_compose_plan_runs_every_strategy_the_straggler_model_takes_on_nodes_of_one_rank(tmp_path, nodes):
    """WHATIF_COMPOSE=1: the clean and straggler runs on WHATIF_NPROC containers of one rank, every sharded strategy
    the straggler model can take at that count (the issue's "every sharded strategy", pipelines at 3 ranks too),
    the DDP step's link at WHATIF_LINK_MBIT and WHATIF_FACTOR times less, and the table told that the containers
    share one machine's cores."""
    runs, table = _plan(tmp_path, "WHATIF_COMPOSE=1", f"WHATIF_NPROC={nodes}", "WHATIF_LINK_MBIT=300")
    assert set(runs) == {"clean", "slow", "base", "shaped"}, runs
    um = user_model.load("examples.whatif_straggler:steady")
    mb = ShardedSettings().microbatches
    takes = {st for st in STRATEGIES if user_model.cannot_run(um, st, nodes, mb) is None}
    assert {"ddp", "fsdp2", "pp_gpipe", "pp_1f1b"} <= takes
    for name, model in (("clean", "steady"), ("slow", "rank1x2")):
        run = runs[name]
        assert run["target"] == "compose-up" and run["NNODES"] == str(nodes) and run["NPROC_PER_NODE"] == "1"
        assert takes <= set(run["SHARDED_STRATEGIES"].split(",")), run["SHARDED_STRATEGIES"]
        assert {f"test_sharded[{st}]" for st in takes} <= set(run["K"].split(" or ")), run["K"]
        assert run["SHARDED_MODEL"] == f"examples.whatif_straggler:{model}" and run["PROFILE"] == "1"
    for name, rate in (("base", "300mbit"), ("shaped", "150mbit")):
        run = runs[name]
        assert run["target"] == "compose-up" and run["NNODES"] == "2" and run["LINK_RATE"] == rate, run
        assert run["EXPERIMENTS"] == "ddp" and run["PROFILE"] == "1"
    assert table[:2] == ["-m", "suite.postmortem.replay.validate"] and "--one-machine" in table, table
    link = table[table.index("--link") + 1].split(",")
    assert [p.rsplit("-", 1)[-1] for p in link] == ["base", "shaped"], link
    assert table[table.index("--factor") + 1] == "2" and table[table.index("--rank") + 1] == "1"


def test_local_plan_runs_local_ranks_and_no_link(tmp_path):
    runs, table = _plan(tmp_path)
    assert set(runs) == {"clean", "slow"} and all(
        r["target"] == "bench-cpu" and r["NPROC"] == "3" for r in runs.values()
    )
    assert "--one-machine" not in table and "--link" not in table
