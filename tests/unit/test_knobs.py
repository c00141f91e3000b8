"""One spelling per knob: the launcher's options, the plugin's and the Makefile's SUITE_ARGS all come
from (or are checked against) suite.config.KNOBS."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from suite import launch
from suite.config import KNOBS, BenchConfig, build_config, config_from_json

ROOT = Path(__file__).resolve().parents[2]


def test_every_knob_is_a_config_field_once():
    fields = {f.name for f in dataclasses.fields(BenchConfig)} - {"extra"}
    assert sorted(k.field for k in KNOBS) == sorted(fields)
    for attr in ("flag", "make"):
        names = [getattr(k, attr) for k in KNOBS]
        assert len(names) == len(set(names)), attr


def test_makefile_passes_each_knob_under_its_one_name():
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^SUITE_ARGS = (.*?)\n(?!\s)", text, re.S | re.M)
    pairs = dict(re.findall(r"--([a-z-]+) \$\((\w+)\)", m.group(1)))
    by_flag = {k.flag: k.make for k in KNOBS}
    for flag, var in pairs.items():
        if flag in ("experiments", "results-root", "run-id"):
            continue
        assert by_flag.get(flag) == var, f"Makefile passes --{flag} $({var}); KNOBS says {by_flag.get(flag)}"


def test_launcher_options_land_in_their_fields():
    argv = []
    for k in KNOBS:
        argv += [f"--{k.flag}", "7" if k.field not in ("dtypes", "redops", "timing_mode", "backend", "device")
                 else {"dtypes": "float64", "redops": "max", "timing_mode": "pipelined", "backend": "gloo",
                       "device": "cpu"}[k.field]]
    a, _ = launch.parse_args(argv + ["--min-bytes", "1", "--max-bytes", "64", "--step-factor", "2",
                                     "--heartbeat-timeout-s", "5", "--precision-pct", "1"])
    cfg = launch.config_from_args(a)
    assert (cfg.iters, cfg.warmup_iters, cfg.root, cfg.pipeline_depth) == (7, 7, 7, 7)
    assert (cfg.dtypes, cfg.redops, cfg.timing_mode) == (("float64",), ("max",), "pipelined")


def test_config_json_round_trips(tmp_path):
    cfg = build_config(min_bytes="2K", dtypes="bf16,int64", timing_mode="pipelined", precision_pct="2.5")
    from suite.fileio import write_json_atomic

    write_json_atomic(tmp_path / "config.json", cfg.as_dict())
    assert config_from_json(tmp_path / "config.json") == cfg
