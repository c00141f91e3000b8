"""One spelling per knob: the launcher's options, the plugin's and the Makefile's SUITE_ARGS all come
from (or are checked against) suite.common.knobs.KNOBS."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite.launch import cli as launch
from suite.common.config import BenchConfig, build_config, config_from_json
from suite.common.knobs import ENV_KNOBS, KNOBS, SECTIONS
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_every_knob_is_a_config_field_once():
    fields = {f.name for f in dataclasses.fields(BenchConfig)} - {"extra"} - set(SECTIONS)
    assert sorted(k.field for k in KNOBS) == sorted(fields)
    for attr in ("flag", "make"):
        names = [getattr(k, attr) for k in KNOBS]
        assert len(names) == len(set(names)), attr


def test_every_experiment_setting_has_one_variable():
    want = sorted((name, f.name) for name, cls in SECTIONS.items() for f in dataclasses.fields(cls))
    assert sorted((k.section, k.field) for k in ENV_KNOBS) == want
    assert len({k.env for k in ENV_KNOBS}) == len(ENV_KNOBS)
    assert not {k.env for k in ENV_KNOBS} & {k.make for k in KNOBS}


def test_the_knob_files_are_the_ones_the_settings_write():
    assert load_script("knob_files").stale() == [], "run python scripts/knob_files.py and commit what it writes"


def test_the_knob_files_follow_a_new_setting_and_name_a_stale_file(tmp_path):
    kf = load_script("knob_files")
    mine = (*ENV_KNOBS, dataclasses.replace(ENV_KNOBS[0], section="mine", field="count", env="MINE_COUNT"))
    assert "\nMINE_COUNT ?=\nexport MINE_COUNT\n" in kf.mk_text(mine)
    compose = (ROOT / kf.COMPOSE).read_text()
    written = kf.compose_text(compose, mine)
    assert written.replace("    MINE_COUNT: ${MINE_COUNT:-}\n", "") == compose != written
    assert "SUITE_FAKE_NODES" not in kf.mk_text() + kf.compose_text(compose)  # NOT_PASSED
    (tmp_path / "mk").mkdir()
    (tmp_path / kf.MK).write_text(kf.mk_text().replace("DDP_HOOKS ?=\n", ""))
    (tmp_path / kf.COMPOSE).write_text(compose.replace("    DDP_HOOKS: ${DDP_HOOKS:-}\n", ""))
    assert kf.stale(tmp_path) == [kf.MK, kf.COMPOSE]
    (tmp_path / kf.COMPOSE).write_text(compose.replace(kf.END, ""))
    with pytest.raises(ValueError, match="needs one line"):
        kf.stale(tmp_path)


def test_make_exports_every_experiment_variable():
    text = "".join(p.read_text() for p in sorted((ROOT / "mk").glob("*.mk")))
    exported = set(" ".join(re.findall(r"^export ([A-Z_ ]+)$", text, re.M)).split())
    missing = {k.env for k in ENV_KNOBS if k.env != "SUITE_FAKE_NODES"} - exported
    assert not missing, f"mk/*.mk does not export {sorted(missing)}"


def test_ranks_read_experiment_knobs_from_the_config_not_the_environment():
    names = "|".join(k.env for k in ENV_KNOBS)
    for p in (ROOT / "experiments").rglob("*.py"):
        hits = re.findall(rf"(?:environ|getenv)[^\n]*[\"'](?:{names})[\"']", p.read_text())
        assert not hits, f"{p.name} reads {hits} from the environment"


def test_launcher_options_land_in_their_fields():
    argv = []
    for k in KNOBS:
        argv += [
            f"--{k.flag}",
            "7"
            if k.field not in ("dtypes", "redops", "timing_mode", "backend", "device", "tables")
            else {
                "dtypes": "float64",
                "redops": "max",
                "timing_mode": "pipelined",
                "backend": "gloo",
                "device": "cpu",
                "tables": "1",
            }[k.field],
        ]
    a, _ = launch.parse_args(
        argv
        + [
            "--min-bytes",
            "1",
            "--max-bytes",
            "64",
            "--step-factor",
            "2",
            "--heartbeat-timeout-s",
            "5",
            "--precision-pct",
            "1",
        ]
    )
    cfg = launch.config_from_args(a)
    assert (cfg.iters, cfg.warmup_iters, cfg.root, cfg.pipeline_depth) == (7, 7, 7, 7)
    assert (cfg.dtypes, cfg.redops, cfg.timing_mode, cfg.tables) == (("float64",), ("max",), "pipelined", True)


def test_config_json_round_trips(tmp_path):
    cfg = build_config(min_bytes="2K", dtypes="bf16,int64", timing_mode="pipelined", precision_pct="2.5")
    from suite.common.fileio import write_json_atomic

    write_json_atomic(tmp_path / "config.json", cfg.as_dict())
    assert config_from_json(tmp_path / "config.json") == cfg


def test_compose_nodes_pass_each_knob_under_its_one_name():
    text = (ROOT / "docker" / "node.sh").read_text()
    block = re.search(r"for pair in (.*?); do", text, re.S).group(1)
    pairs = dict(p.split(":") for p in block.replace("\\", " ").split())
    by_flag = {k.flag: k.make for k in KNOBS}
    for flag, var in pairs.items():
        if flag == "run-id":
            continue
        assert by_flag.get(flag) == var, f"node.sh passes --{flag} from ${var}; KNOBS says {by_flag.get(flag)}"
    assert not {k.flag for k in KNOBS} - set(pairs) - {"backend", "device"}  # those two are always passed


def test_experiment_settings_are_the_config_sections_and_their_env_spellings():
    from suite import registry
    from suite.common.knobs import env_knobs

    specs = registry.discover()
    assert SECTIONS == {n: s.settings for n, s in specs.items() if s.settings is not None}
    assert {"ddp", "model_parallel", "placement", "doctor"} <= set(SECTIONS)
    for name, cls in SECTIONS.items():
        assert isinstance(getattr(BenchConfig(), name), cls)
        assert all(f.metadata.get("env") for f in dataclasses.fields(cls)), name

    @dataclasses.dataclass(frozen=True)
    class Unspelled:
        size: int = 1

    with pytest.raises(registry.RegistryError, match=r"Unspelled.size has no metadata"):
        env_knobs({"x": Unspelled})


def test_importing_the_shared_base_imports_no_experiment():
    # suite/common/ is what the launcher and the ranks share: the experiments' settings it needs (knobs.sections(),
    # BenchConfig) are read when first asked for, an edge the import graph sees, not as a side effect of its import
    code = (
        "import importlib, pkgutil, sys\n"
        "import suite.common\n"
        "for m in pkgutil.walk_packages(suite.common.__path__, 'suite.common.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'experiments'))\n"
        "from suite.common.config import BenchConfig\n"
        "print('ddp' in {f.name for f in __import__('dataclasses').fields(BenchConfig)})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "True"], proc.stdout
