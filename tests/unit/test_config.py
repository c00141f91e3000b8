"""Configuration validation: every bad knob is rejected with a message naming it."""

import dataclasses

import pytest

from suite.common.config import BenchConfig, ConfigError, build_config, validate


def test_defaults_are_valid_and_frozen():
    cfg = build_config()
    assert cfg.sizes()[0] == 1024 and cfg.sizes()[-1] == 1 << 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.iters = 3  # frozen


def test_aliases_and_lists():
    cfg = build_config(dtypes="fp16, bf16,float", redops="prod,sum", min_bytes="4K", max_bytes="1M")
    assert cfg.dtypes == ("float16", "bfloat16", "float32")
    assert cfg.redops == ("product", "sum")
    assert cfg.min_bytes == 4096


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"dtypes": "float8"}, "unknown dtype"),
        ({"dtypes": ""}, "DTYPES is empty"),
        ({"redops": "xor"}, "unknown reduce op"),
        ({"min_bytes": "2M", "max_bytes": "1M"}, "MAX_BYTES"),
        ({"min_bytes": "lots"}, "not a byte size"),
        ({"step_factor": "1"}, "STEP_FACTOR"),
        ({"step_factor": "x"}, "step_factor must be a number"),
        ({"min_bytes": "1", "max_bytes": "1T", "step_factor": "1.1"}, "more than 64 sizes"),
        ({"iters": "0"}, "ITERS"),
        ({"warmup_iters": "-1"}, "WARMUP"),
        ({"timing_mode": "async"}, "timing mode"),
        ({"backend": "nccl2"}, "unknown backend"),
        ({"device": "tpu"}, "unknown device"),
        ({"precision_pct": "150"}, "PRECISION"),
        ({"timeout_s": "0"}, "TIMEOUT_S"),
        ({"timeout_s": "nan"}, "TIMEOUT_S"),
        ({"root": "-1"}, "ROOT"),
        ({"backend": "nccl", "device": "cpu"}, "nccl needs DEVICE=cuda"),
        ({"backend": "mpi", "device": "cuda"}, "backend mpi needs DEVICE=cpu; use BACKEND=nccl for CUDA tensors"),
        ({"bogus": 1}, "unknown setting"),
    ],
)
def test_rejects(kw, match):
    with pytest.raises(ConfigError, match=match):
        build_config(**kw)


def test_root_checked_against_world():
    cfg = BenchConfig(root=3)
    validate(cfg, world_size=4)
    with pytest.raises(ConfigError, match="ROOT 3"):
        validate(cfg, world_size=2)


def test_compared_sizes_are_the_largest_of_the_sweep():
    """The sizes placement and backends compare at, named once (review §6 item 1)."""
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor=4)
    assert cfg.compared_sizes() == [64 << 10, 256 << 10, 1 << 20]
    cfg = build_config(min_bytes="1", max_bytes="16", step_factor=2)
    assert cfg.compared_sizes() == [4, 8, 16]
    assert build_config(min_bytes="0", max_bytes="0").compared_sizes() == []  # no zero-byte comparisons


def test_budget_s_is_validated_and_an_explicit_iters_turns_it_off():
    from suite.common.config import build_config

    assert build_config().budget_s == 0.5
    assert build_config(iters="7").budget_s == 0.0  # the user asked for a count
    assert build_config(iters="7", budget_s="2").budget_s == 2.0
    for bad in ("-1", "nan", "1e9"):
        with pytest.raises(ConfigError, match="BUDGET_S"):
            build_config(budget_s=bad)


@pytest.mark.parametrize(
    ("args", "env", "budget"),
    [
        ((), {}, "0.5"),  # the default
        (("ITERS=30",), {}, "0"),  # a count asked for on the command line
        ((), {"ITERS": "30"}, "0"),  # ... or in the environment
        (("ITERS=30", "BUDGET_S=2"), {}, "2"),  # both asked for
        (("BUDGET_S=1",), {}, "1"),
    ],
)
def test_make_turns_the_budget_off_when_iters_is_given(args, env, budget):
    import os
    import subprocess
    import sys
    from pathlib import Path

    venv = Path(sys.executable).parent.parent
    r = subprocess.run(
        ["make", "-n", "-o", f"{venv}/.installed", f"VENV={venv}", "bench-cpu", *args],
        cwd=Path(__file__).resolve().parents[2],
        env={k: v for k, v in os.environ.items() if k not in ("ITERS", "BUDGET_S")} | env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert f" --budget-s {budget} " in r.stdout, r.stdout
