"""Typed configuration of a benchmark run.

One frozen, keyword-only dataclass holds every knob; ``validate`` rejects bad
values with a message that says what to change, before any process starts.
The same object is rebuilt on every rank from identical command-line options,
so collection and calibration are identical everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from suite import metrics
from suite.errors import ConfigError  # noqa: F401  (where the knobs are checked, callers catch it)
from suite.common import backends
from suite.common.knobs import section_value, sections

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
REDOPS = ("sum", "avg", "product", "min", "max")
BACKENDS = ("auto", *backends.names())
DEVICES = ("auto", "cpu", "cuda")
TIMING_MODES = ("blocking", "pipelined", "cuda_graph")
COMPARED_SIZES = 3
"""Side-by-side comparisons (placement, backends) run at this many of the sweep's largest sizes."""

TimingMode = Literal["blocking", "pipelined", "cuda_graph"]
Backend = str
"""auto, or a registered backend's name (BACKENDS: suite/common/backends/)."""
Device = Literal["auto", "cpu", "cuda"]


@dataclass(frozen=True, kw_only=True)
class RunKnobs:
    """Knobs shared by every experiment of a run (BenchConfig adds each experiment's settings)."""

    min_bytes: int = 1 << 10
    """Smallest message in the size sweep, bytes (nccl-tests -b)."""
    max_bytes: int = 1 << 20
    """Largest message in the size sweep, bytes (nccl-tests -e)."""
    step_factor: float = 4.0
    """Multiplicative step of the sweep (nccl-tests -f)."""
    dtypes: tuple[str, ...] = ("float32",)
    """Element types to run; a subset of DTYPES."""
    redops: tuple[str, ...] = REDOPS
    """Reduce operations for reducing collectives; a subset of REDOPS."""
    root: int = 0
    """Root rank of rooted collectives (broadcast, reduce, gather, scatter)."""
    warmup_iters: int = 5
    """Untimed samples before the timed ones (in pipelined mode each issues one op per buffer set)."""
    iters: int = 20
    """Timed samples per case (the minimum, in precision mode)."""
    timing_mode: TimingMode = "blocking"
    """blocking: one op per sample, ranks aligned by a barrier before each;
    pipelined: ``pipeline_depth`` ops issued back to back, one sync, sample =
    elapsed / depth (nccl-tests' default); cuda_graph (NCCL on CUDA only):
    ``pipeline_depth`` ops captured in one CUDA graph, sample = replay / depth
    (nccl-tests -G, for small-message latency without the per-op launch cost)."""
    pipeline_depth: int = 8
    """Ops per sample in pipelined and cuda_graph modes."""
    precision_pct: float = 0.0
    """If > 0: keep sampling until the 95% CI of the median is within this many
    percent of the median, or ``max_time_s`` is spent. 0 turns it off."""
    max_time_s: float = 10.0
    """Time cap per case for precision mode, seconds."""
    budget_s: float = 0.5
    """Sample budget per case, seconds: a case whose samples so far say that ``iters`` of them would pass
    it takes fewer (never below ``BUDGET_MIN_SAMPLES``). 0 turns it off; so does precision mode, and the
    Makefile passes 0 when ITERS is given (the user asked for a count)."""
    backend: Backend = "auto"
    """Process-group backend; auto = nccl for cuda, gloo for cpu."""
    device: Device = "auto"
    """Where tensors live; auto = cuda when available, else cpu."""
    timeout_s: float = 60.0
    """Process-group timeout: an op that waits longer than this fails."""
    heartbeat_timeout_s: float = 15.0
    """A rank whose heartbeat stops this long is reported lost and the run ends
    (catches frozen and partitioned ranks well before ``timeout_s``); 0 turns it off."""
    tables: bool = False
    """Print the full tables in the terminal at the end of the run, as well as in ``<run>/tables.txt`` and the
    report (where they always are); off: the run ends with its short summary."""

    def sizes(self) -> list[int]:
        """The message sizes of the sweep, bytes."""
        return metrics.size_sweep(self.min_bytes, self.max_bytes, self.step_factor)

    def largest_sizes(self, n: int) -> list[int]:
        """The largest ``n`` non-zero sizes of the sweep (the bandwidth-bound end), bytes."""
        return [s for s in self.sizes() if s > 0][-n:]

    def compared_sizes(self) -> list[int]:
        """The sizes side-by-side comparisons run at (placement, backends): the largest
        ``COMPARED_SIZES`` non-zero sizes of the sweep, bytes."""
        return self.largest_sizes(COMPARED_SIZES)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@functools.cache
def bench_config() -> type:
    """``BenchConfig``, made when first asked for (``from suite.common.config import BenchConfig`` asks): its fields
    are the experiments' settings, so importing this module imports no experiment."""
    cls = dataclasses.make_dataclass(
        "BenchConfig",
        [
            *((name, cls, field(default_factory=cls)) for name, cls in sections().items()),
            ("extra", dict, field(default_factory=dict, compare=False)),
        ],
        bases=(RunKnobs,),
        frozen=True,
        kw_only=True,
    )
    cls.__module__ = __name__  # pickling and reprs find it here
    cls.__doc__ = """Every knob of a run: the run-wide ones (RunKnobs), then one field per experiment with settings
(``cfg.<name>``: its SPEC.settings, knobs.sections()), then ``extra``: free-form settings recorded with the results
(not read by any experiment). Built from the discovered experiments, so adding one adds no line here."""
    return cls


def __getattr__(name: str):
    if name == "BenchConfig":
        return bench_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # the annotations' name for the class bench_config() makes: a RunKnobs with the sections
    BenchConfig = RunKnobs


def config_from_json(path) -> BenchConfig:
    """The validated config the launcher wrote for the ranks (``<run_dir>/config.json``)."""
    import json

    with open(path) as fh:
        return build_config(**json.load(fh))


def _split(value) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = str(value).replace(" ", ",").split(",")
    return tuple(i.strip().lower() for i in items if i.strip())


_ALIASES = {
    "prod": "product",
    "fp32": "float32",
    "fp64": "float64",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "long": "int64",
}


def _switch(name: str, value) -> bool:
    """An on/off knob: 1/0 (also true/false, yes/no, on/off); ConfigError naming it otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be 0 or 1, got {value!r}")


def build_config(**raw) -> BenchConfig:
    """Build and validate a BenchConfig from strings or values (CLI, env, make)."""
    kw: dict = {}
    try:
        for key in ("min_bytes", "max_bytes"):
            if key in raw and raw[key] is not None:
                kw[key] = metrics.parse_size(raw[key])
    except ValueError as e:
        raise ConfigError(str(e)) from None
    for key in ("dtypes", "redops"):
        if key in raw and raw[key] is not None:
            kw[key] = tuple(_ALIASES.get(v, v) for v in _split(raw[key]))
    for key, conv in (
        ("step_factor", float),
        ("root", int),
        ("warmup_iters", int),
        ("iters", int),
        ("pipeline_depth", int),
        ("precision_pct", float),
        ("max_time_s", float),
        ("budget_s", float),
        ("timeout_s", float),
        ("heartbeat_timeout_s", float),
    ):
        if key in raw and raw[key] is not None:
            try:
                kw[key] = conv(raw[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{key} must be a number, got {raw[key]!r}") from None
    if kw.get("iters") is not None and raw.get("budget_s") is None:
        kw["budget_s"] = 0.0  # an explicit count and no budget given: the user asked for that count
    if raw.get("tables") is not None:
        kw["tables"] = _switch("TABLES", raw["tables"])
    for key in ("timing_mode", "backend", "device"):
        if key in raw and raw[key] is not None:
            kw[key] = str(raw[key]).strip().lower()
    if "extra" in raw and raw["extra"] is not None:
        kw["extra"] = dict(raw["extra"])
    for name, cls in sections().items():
        value = raw.get(name)
        if value is None or isinstance(value, cls):
            if value is not None:
                kw[name] = value
            continue
        fields = {f.name for f in dataclasses.fields(cls)}
        bad = set(value) - fields
        if bad:
            raise ConfigError(f"unknown {name} setting(s): {', '.join(sorted(bad))}")
        kw[name] = cls(**{k: section_value(name, k, v) for k, v in value.items()})
    unknown = set(raw) - {f.name for f in dataclasses.fields(bench_config())}
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    cfg = bench_config()(**kw)
    validate(cfg)
    return cfg


def validate(cfg: BenchConfig, world_size: int | None = None) -> None:
    """Raise ConfigError naming the knob to change if ``cfg`` cannot run."""

    def bad(msg: str):
        raise ConfigError(msg)

    if cfg.min_bytes < 0:
        bad(f"MIN_BYTES must be >= 0, got {cfg.min_bytes}")
    if cfg.max_bytes < cfg.min_bytes:
        bad(f"MAX_BYTES ({cfg.max_bytes}) must be >= MIN_BYTES ({cfg.min_bytes})")
    if cfg.max_bytes > 1 << 40:
        bad(f"MAX_BYTES {cfg.max_bytes} is larger than 1T; no host can hold that")
    if not (cfg.step_factor > 1) and cfg.min_bytes != cfg.max_bytes:
        bad(f"STEP_FACTOR must be > 1, got {cfg.step_factor}")
    if cfg.step_factor > 1 and len(cfg.sizes()) > 64:
        bad(
            f"the sweep {cfg.min_bytes}..{cfg.max_bytes} x{cfg.step_factor} has more than 64 sizes; "
            "raise STEP_FACTOR or narrow the range"
        )
    if not cfg.dtypes:
        bad("DTYPES is empty; choose from " + ", ".join(DTYPES))
    for d in cfg.dtypes:
        if d not in DTYPES:
            bad(f"unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    if not cfg.redops:
        bad("REDOPS is empty; choose from " + ", ".join(REDOPS))
    for r in cfg.redops:
        if r not in REDOPS:
            bad(f"unknown reduce op {r!r}; choose from {', '.join(REDOPS)}")
    if cfg.timing_mode not in TIMING_MODES:
        bad(f"unknown timing mode {cfg.timing_mode!r}; choose from {', '.join(TIMING_MODES)}")
    if cfg.backend not in BACKENDS:
        bad(f"unknown backend {cfg.backend!r}; choose from {', '.join(BACKENDS)}")
    if cfg.device not in DEVICES:
        bad(f"unknown device {cfg.device!r}; choose from {', '.join(DEVICES)}")
    if cfg.iters < 1:
        bad(f"ITERS must be >= 1, got {cfg.iters}")
    if cfg.iters > 1_000_000:
        bad(f"ITERS {cfg.iters} is unreasonably large (max 1000000)")
    if cfg.warmup_iters < 0:
        bad(f"WARMUP must be >= 0, got {cfg.warmup_iters}")
    if cfg.pipeline_depth < 1:
        bad(f"PIPELINE_DEPTH must be >= 1, got {cfg.pipeline_depth}")
    if not (0 <= cfg.precision_pct < 100):
        bad(f"PRECISION must be a percentage in [0, 100), got {cfg.precision_pct}")
    if not (cfg.max_time_s > 0) or cfg.max_time_s != cfg.max_time_s:
        bad(f"MAX_TIME_S must be > 0, got {cfg.max_time_s}")
    if not (0 <= cfg.budget_s <= 86400):
        bad(f"BUDGET_S must be between 0 (off) and 86400 seconds, got {cfg.budget_s}")
    if not (cfg.timeout_s > 0) or cfg.timeout_s != cfg.timeout_s:
        bad(f"TIMEOUT_S must be > 0, got {cfg.timeout_s}")
    if not (cfg.heartbeat_timeout_s >= 0) or cfg.heartbeat_timeout_s > 86400:
        bad(f"HEARTBEAT_S must be between 0 (off) and 86400, got {cfg.heartbeat_timeout_s}")
    if 0 < cfg.heartbeat_timeout_s < 3:
        bad(f"HEARTBEAT_S {cfg.heartbeat_timeout_s} is too short to tell a busy rank from a lost one; use >= 3")
    if cfg.root < 0:
        bad(f"ROOT must be >= 0, got {cfg.root}")
    if world_size is not None and cfg.root >= world_size:
        bad(f"ROOT {cfg.root} does not exist in a world of {world_size} ranks")
    for name in sections():
        check = getattr(getattr(cfg, name), "validate", None)
        if check is not None:
            check()
        against = getattr(getattr(cfg, name), "validate_against", None)  # its knobs against the run's own
        if against is not None:
            against(cfg)
    if cfg.backend != "auto" and cfg.device != "auto" and cfg.device not in backends.record_of(cfg.backend).devices:
        needs = " or ".join(backends.record_of(cfg.backend).devices)
        bad(
            f"backend {cfg.backend} needs DEVICE={needs}; use BACKEND={backends.auto_backend(cfg.device)} "
            f"for {cfg.device.upper()} tensors"
        )
    check_timing_mode(cfg.timing_mode, cfg.backend, cfg.device)


def check_timing_mode(timing_mode: str, backend: str, device: str) -> None:
    """cuda_graph captures NCCL work in a CUDA graph: CPU tensors and Gloo/MPI/UCC
    cannot be captured. Called with the knobs as given (auto passes) and again by
    the launcher's preflight with auto resolved."""
    captured = backend == "auto" or backends.record_of(backend).cuda_graphs
    if timing_mode == "cuda_graph" and (device == "cpu" or not captured):
        raise ConfigError(
            f"TIMING=cuda_graph needs BACKEND=nccl and DEVICE=cuda (got {backend} on {device}); "
            "use TIMING=blocking or pipelined on CPU/Gloo"
        )
