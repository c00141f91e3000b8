"""The knobs' spellings: each run-wide knob's flag and make variable (KNOBS), the experiments' settings
(SECTIONS) and the environment variable of each of their fields (ENV_KNOBS), and how a knob's text becomes
its value (``parse_count``, ``section_value``, ``settings_from_env``).

SECTIONS and ENV_KNOBS come from the experiments (suite.registry): they are read when first asked for
(``sections()``, ``experiment_knobs()``), not when this module is imported, so importing suite/common/ imports
no experiment."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from suite import metrics
from suite.common import backends
from suite.errors import ConfigError


@functools.cache
def sections() -> dict[str, type]:
    """Experiment settings nested in BenchConfig, by field name (= the experiment's name): each experiment's
    ``SPEC.settings`` (experiments/<name>/settings.py). The one place suite/common/ reaches the experiments."""
    from suite import registry

    return {name: spec.settings for name, spec in registry.discover().items() if spec.settings is not None}


@dataclass(frozen=True)
class Knob:
    """One knob's spellings: the BenchConfig field, the command-line flag of ``suite.launch.cli`` and of
    the pytest plugin (``--<flag>``), and the make variable."""

    field: str
    flag: str
    make: str
    help: str


KNOBS: tuple[Knob, ...] = (
    Knob("min_bytes", "min-bytes", "MIN_BYTES", "smallest message size (e.g. 1K)"),
    Knob("max_bytes", "max-bytes", "MAX_BYTES", "largest message size (e.g. 1M)"),
    Knob("step_factor", "step-factor", "STEP_FACTOR", "multiplicative size step"),
    Knob("dtypes", "dtypes", "DTYPES", "comma-separated dtypes"),
    Knob("redops", "redops", "REDOPS", "comma-separated reduce ops"),
    Knob("root", "root", "ROOT", "root rank of rooted collectives"),
    Knob("warmup_iters", "warmup", "WARMUP", "warm-up iterations"),
    Knob("iters", "iters", "ITERS", "timed iterations per case"),
    Knob("timing_mode", "timing", "TIMING", "blocking | pipelined | cuda_graph"),
    Knob("pipeline_depth", "pipeline-depth", "PIPELINE_DEPTH", "ops per sample in pipelined and cuda_graph modes"),
    Knob("precision_pct", "precision-pct", "PRECISION", "target CI half-width of the median, percent (0 = off)"),
    Knob("max_time_s", "max-time-s", "MAX_TIME_S", "time cap per case in precision mode"),
    Knob("budget_s", "budget-s", "BUDGET_S", "sample budget per case, seconds (0 = off: take ITERS samples)"),
    Knob("backend", "backend", "BACKEND", " | ".join(("auto", *backends.names()))),
    Knob("device", "device", "DEVICE", "auto | cpu | cuda"),
    Knob("timeout_s", "timeout-s", "TIMEOUT_S", "process-group timeout, seconds"),
    Knob(
        "heartbeat_timeout_s",
        "heartbeat-timeout-s",
        "HEARTBEAT_S",
        "declare a silent rank lost after this long (0 = off)",
    ),
    Knob("tables", "tables", "TABLES", "1: the full tables in the terminal too (always in <run>/tables.txt)"),
)
"""Every run-wide knob, spelled once; the launcher's and the plugin's options are made from it, and a
test checks the Makefile's SUITE_ARGS against it."""


@dataclass(frozen=True)
class EnvKnob:
    """An experiment knob's one spelling: the environment (= make) variable of a settings field."""

    section: str
    field: str
    env: str


def env_knobs(sections: dict[str, type]) -> tuple[EnvKnob, ...]:
    """Each settings field's EnvKnob (its ``metadata["env"]``); RegistryError for a field without one."""
    out = []
    for section, cls in sections.items():
        for f in dataclasses.fields(cls):
            if "env" not in f.metadata:
                from suite.registry import RegistryError

                raise RegistryError(f"{cls.__module__}.{cls.__name__}.{f.name} has no metadata={{'env': ...}}")
            out.append(EnvKnob(section, f.name, f.metadata["env"]))
    return tuple(out)


@functools.cache
def experiment_knobs() -> tuple[EnvKnob, ...]:
    """Experiment knobs set in the environment (make exports them), from each settings field's
    ``metadata["env"]``; the launcher reads them once into BenchConfig, and the ranks get them from
    config.json, never from their own environment."""
    return env_knobs(sections())


def __getattr__(name: str):
    """``SECTIONS`` (``sections()``) and ``ENV_KNOBS`` (``experiment_knobs()``), read when first asked for."""
    if name == "SECTIONS":
        return sections()
    if name == "ENV_KNOBS":
        return experiment_knobs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


HOST_KNOBS: tuple[EnvKnob, ...] = (
    EnvKnob("inject", "plan", "INJECT"),
    EnvKnob("inject", "seed", "SEED"),
    EnvKnob("inject", "run_s", "INJECT_RUN_S"),
)
"""Knobs the launcher alone reads, from its environment (make exports them), and keeps from the ranks and from
config.json: the injector's plan (suite/inject/plan.py), which is the truth a run is scored against."""


def parse_count(raw: str, name: str) -> int:
    """An integer knob; accepts suffixes K/M/G (powers of 1000) like ``25M``."""
    raw = str(raw).strip()
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}
    try:
        if raw and raw[-1].lower() in mult:
            return int(float(raw[:-1]) * mult[raw[-1].lower()])
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a count (examples: 4000000, 25M)") from None


def settings_from_env(env=None) -> dict:
    """The experiment knobs set in ``env`` (default os.environ), as BenchConfig section dicts."""
    import os

    env = os.environ if env is None else env
    out: dict = {}
    for k in experiment_knobs():
        raw = str(env.get(k.env, "")).strip()
        if not raw:
            continue
        out.setdefault(k.section, {})[k.field] = section_value(k.section, k.field, raw)
    return out


def section_value(section: str, name: str, value):
    """A section field from a string (the environment), a list (config.json) or a value."""
    default = getattr(sections()[section](), name)
    label = next((k.env for k in experiment_knobs() if (k.section, k.field) == (section, name)), f"{section}.{name}")
    if isinstance(default, str):
        return str(value).strip()
    if name.endswith("_bytes"):  # sizes as the sweep spells them: 64, 4K, 1M (powers of 1024)
        items = (
            value.replace(" ", ",").split(",")
            if isinstance(value, str)
            else list(value)
            if isinstance(value, (list, tuple))
            else [value]
        )
        try:
            sizes = tuple(metrics.parse_size(str(v).strip()) for v in items if str(v).strip())
        except ValueError as e:
            raise ConfigError(f"{label}={value!r}: {e}") from None
        if isinstance(default, tuple):
            return sizes
        if len(sizes) != 1:
            raise ConfigError(f"{label}={value!r} must be one size (e.g. 64, 256K)")
        return sizes[0]
    if isinstance(default, tuple) and default and isinstance(default[0], str):
        items = value.replace(" ", ",").split(",") if isinstance(value, str) else list(value)
        return tuple(str(v).strip() for v in items if str(v).strip())
    if isinstance(default, tuple):
        try:
            items = value.replace(" ", ",").split(",") if isinstance(value, str) else list(value)
            return tuple(float(v) for v in items if str(v).strip())
        except (TypeError, ValueError):
            raise ConfigError(f"{label}={value!r} must be comma-separated numbers") from None
    return parse_count(value, label)
