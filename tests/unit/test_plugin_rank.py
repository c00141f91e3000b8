"""The pytest plugin's idea of this process's rank (which rank prints, writes bench.json, records a
failure) is the rank init_distributed starts with."""

from __future__ import annotations

import pytest

from suite.harness.pytest import run_state

LAUNCH_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE",
)


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({"RANK": "1", "WORLD_SIZE": "2"}, 1),
        ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, 3),
        ({"RANK": "1"}, 0),  # no WORLD_SIZE: init_distributed runs one process, rank 0, which must print
        ({"RANK": "x", "WORLD_SIZE": "2"}, 0),  # malformed: init_distributed names it
        ({}, 0),
    ],
)
def test_the_plugins_rank_is_the_one_init_distributed_reads(monkeypatch, env, rank):
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert run_state.rank_from_env() == rank
