"""Typed configuration of a benchmark run.

One frozen, keyword-only dataclass holds every knob; ``validate`` rejects bad
values with a message that says what to change, before any process starts.
The same object is rebuilt on every rank from identical command-line options,
so collection and calibration are identical everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from suite import metrics

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
REDOPS = ("sum", "avg", "product", "min", "max")
BACKENDS = ("auto", "gloo", "nccl", "mpi", "ucc")
DEVICES = ("auto", "cpu", "cuda")
TIMING_MODES = ("blocking", "pipelined", "cuda_graph")
COMPARED_SIZES = 3
"""Side-by-side comparisons (placement, backends) run at this many of the sweep's largest sizes."""

TimingMode = Literal["blocking", "pipelined", "cuda_graph"]
Backend = Literal["auto", "gloo", "nccl", "mpi", "ucc"]
Device = Literal["auto", "cpu", "cuda"]


class ConfigError(ValueError):
    """A knob has a value the suite cannot run with; the message names the fix."""


DDP_HOOK_NAMES = ("allreduce", "fp16_compress", "bf16_compress", "powerSGD", "sum", "fp16_scaled", "bn_skew")
"""DDP_HOOKS choices (experiments/ddp.py registers each); ``sum`` all-reduces without dividing by the world size,
``fp16_scaled`` is fp16 compression whose average comes back 1.01 times too large, ``bn_skew`` averages correctly
but moves BatchNorm running_mean by 2^-10 (all three wrong on purpose)."""


@dataclass(frozen=True, kw_only=True)
class DdpSettings:
    """The DDP experiment's knobs (make variables DDP_*)."""

    params: int = 2_000_000
    """DDP_PARAMS: parameter budget of the MLP (suffixes K/M/G, e.g. 25M)."""
    batch_per_rank: int = 32
    """DDP_BATCH: samples per rank per (micro-)step; the article uses 32."""
    bucket_fractions: tuple[float, ...] = (0.125, 0.5, 1.0, 2.0)
    """DDP_BUCKET_FRACTIONS: bucket caps swept, as fractions of the MLP's gradient bytes."""
    buckets_mb: tuple[float, ...] = ()
    """DDP_BUCKETS_MB: absolute bucket_cap_mb values swept besides the fractions (and DDP's default 25)."""
    hooks: tuple[str, ...] = ("allreduce", "fp16_compress", "bf16_compress", "powerSGD")
    """DDP_HOOKS: communication hooks to run (DDP_HOOK_NAMES; ``sum``, ``fp16_scaled`` and ``bn_skew`` are wrong on
    purpose: the check's own tests)."""
    accum: int = 4
    """DDP_ACCUM: micro-batches per optimizer step in the gradient-accumulation cases."""
    powersgd_rank: int = 1
    """DDP_POWERSGD_RANK: PowerSGD matrix_approximation_rank."""


@dataclass(frozen=True, kw_only=True)
class ModelParallelSettings:
    """The model-parallel experiment's split layer and global batch (make variables MP_*)."""

    in_features: int = 2048
    """MP_IN: input features of the split Linear layer."""
    out_features: int = 2048
    """MP_OUT: output features (split by rows over the ranks)."""
    batch: int = 64
    """MP_BATCH: global batch."""
    stage_features: int = 512
    """MP_STAGE_FEATURES: width d of each pipeline stage's layer (a d x d matmul per micro-batch: the
    stage's compute; 512 with 128 rows makes compute and one hop's transfer comparable on CPU Gloo)."""
    microbatch_rows: int = 128
    """MP_MICROBATCH_ROWS: rows of one pipeline micro-batch (rows x d float32 cross each hop)."""


@dataclass(frozen=True, kw_only=True)
class PlacementSettings:
    """The placement experiment's knobs."""

    fake_nodes: int = 0
    """SUITE_FAKE_NODES: group the ranks into this many simulated nodes for the hierarchical
    all_reduce (0 = the real hosts)."""


@dataclass(frozen=True, kw_only=True)
class DoctorSettings:
    """The doctor's probes (make variables DOCTOR_*, EXPECT_LINK_RATE; experiments/doctor.py)."""

    small_bytes: int = 64
    """DOCTOR_SMALL_BYTES: the message of the pairwise latency probe (ping-pong)."""
    large_bytes: int = 256 << 10
    """DOCTOR_LARGE_BYTES: one message of the pairwise bandwidth probes and the ring (a window of them)."""
    window: int = 4
    """DOCTOR_WINDOW: messages in flight per bandwidth sample (OSU osu_bw's window, smaller: time)."""
    collective_bytes: tuple[int, ...] = (4 << 10, 64 << 10, 1 << 20)
    """DOCTOR_SIZES: all_reduce and all_gather sizes whose per-rank times look for a straggler."""
    compute_ms: int = 50
    """DOCTOR_COMPUTE_MS: the fixed matmul work of the straggler probe lasts at least this long on the
    slowest rank (calibrated once, the same work on every rank). Long enough that a CPU quota (a
    container's cpus, enforced per 100 ms period) binds within a sample, as it does in a training step."""
    expect_link_rate: str = ""
    """EXPECT_LINK_RATE: what an inter-node link should carry (a tc rate: 10gbit, 200mbit); empty: the
    compose LINK_RATE when the run has one, else no expectation (links are compared with their class)."""


SECTIONS = {
    "ddp": DdpSettings,
    "model_parallel": ModelParallelSettings,
    "placement": PlacementSettings,
    "doctor": DoctorSettings,
}
"""Experiment settings nested in BenchConfig, by field name."""


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Knobs shared by every experiment of a run."""

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
    backend: Backend = "auto"
    """Process-group backend; auto = nccl for cuda, gloo for cpu."""
    device: Device = "auto"
    """Where tensors live; auto = cuda when available, else cpu."""
    timeout_s: float = 60.0
    """Process-group timeout: an op that waits longer than this fails."""
    heartbeat_timeout_s: float = 15.0
    """A rank whose heartbeat stops this long is reported lost and the run ends
    (catches frozen and partitioned ranks well before ``timeout_s``); 0 turns it off."""
    ddp: DdpSettings = field(default_factory=DdpSettings)
    """The DDP experiment's knobs (DDP_*)."""
    model_parallel: ModelParallelSettings = field(default_factory=ModelParallelSettings)
    """The model-parallel experiment's knobs (MP_*)."""
    placement: PlacementSettings = field(default_factory=PlacementSettings)
    """The placement experiment's knobs (SUITE_FAKE_NODES)."""
    doctor: DoctorSettings = field(default_factory=DoctorSettings)
    """The doctor's probes (DOCTOR_*, EXPECT_LINK_RATE)."""
    extra: dict = field(default_factory=dict, compare=False)
    """Free-form settings recorded with the results (not read by any experiment)."""

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


@dataclass(frozen=True)
class Knob:
    """One knob's spellings: the BenchConfig field, the command-line flag of ``suite.launch`` and of
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
    Knob("backend", "backend", "BACKEND", "auto | gloo | nccl | mpi | ucc"),
    Knob("device", "device", "DEVICE", "auto | cpu | cuda"),
    Knob("timeout_s", "timeout-s", "TIMEOUT_S", "process-group timeout, seconds"),
    Knob(
        "heartbeat_timeout_s",
        "heartbeat-timeout-s",
        "HEARTBEAT_S",
        "declare a silent rank lost after this long (0 = off)",
    ),
)
"""Every run-wide knob, spelled once; the launcher's and the plugin's options are made from it, and a
test checks the Makefile's SUITE_ARGS against it."""


@dataclass(frozen=True)
class EnvKnob:
    """An experiment knob's one spelling: the environment (= make) variable of a settings field."""

    section: str
    field: str
    env: str


ENV_KNOBS: tuple[EnvKnob, ...] = (
    EnvKnob("ddp", "params", "DDP_PARAMS"),
    EnvKnob("ddp", "batch_per_rank", "DDP_BATCH"),
    EnvKnob("ddp", "buckets_mb", "DDP_BUCKETS_MB"),
    EnvKnob("ddp", "bucket_fractions", "DDP_BUCKET_FRACTIONS"),
    EnvKnob("ddp", "hooks", "DDP_HOOKS"),
    EnvKnob("ddp", "accum", "DDP_ACCUM"),
    EnvKnob("ddp", "powersgd_rank", "DDP_POWERSGD_RANK"),
    EnvKnob("model_parallel", "in_features", "MP_IN"),
    EnvKnob("model_parallel", "out_features", "MP_OUT"),
    EnvKnob("model_parallel", "batch", "MP_BATCH"),
    EnvKnob("model_parallel", "stage_features", "MP_STAGE_FEATURES"),
    EnvKnob("model_parallel", "microbatch_rows", "MP_MICROBATCH_ROWS"),
    EnvKnob("placement", "fake_nodes", "SUITE_FAKE_NODES"),
    EnvKnob("doctor", "small_bytes", "DOCTOR_SMALL_BYTES"),
    EnvKnob("doctor", "large_bytes", "DOCTOR_LARGE_BYTES"),
    EnvKnob("doctor", "window", "DOCTOR_WINDOW"),
    EnvKnob("doctor", "collective_bytes", "DOCTOR_SIZES"),
    EnvKnob("doctor", "compute_ms", "DOCTOR_COMPUTE_MS"),
    EnvKnob("doctor", "expect_link_rate", "EXPECT_LINK_RATE"),
)
"""Experiment knobs set in the environment (make exports them); the launcher reads them once into
BenchConfig, and the ranks get them from config.json, never from their own environment."""


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
    for k in ENV_KNOBS:
        raw = str(env.get(k.env, "")).strip()
        if not raw:
            continue
        out.setdefault(k.section, {})[k.field] = _section_value(k.section, k.field, raw)
    return out


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


def _section_value(section: str, name: str, value):
    """A section field from a string (the environment), a list (config.json) or a value."""
    default = getattr(SECTIONS[section](), name)
    label = next((k.env for k in ENV_KNOBS if (k.section, k.field) == (section, name)), f"{section}.{name}")
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
        ("timeout_s", float),
        ("heartbeat_timeout_s", float),
    ):
        if key in raw and raw[key] is not None:
            try:
                kw[key] = conv(raw[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{key} must be a number, got {raw[key]!r}") from None
    for key in ("timing_mode", "backend", "device"):
        if key in raw and raw[key] is not None:
            kw[key] = str(raw[key]).strip().lower()
    if "extra" in raw and raw["extra"] is not None:
        kw["extra"] = dict(raw["extra"])
    for name, cls in SECTIONS.items():
        value = raw.get(name)
        if value is None or isinstance(value, cls):
            if value is not None:
                kw[name] = value
            continue
        fields = {f.name for f in dataclasses.fields(cls)}
        bad = set(value) - fields
        if bad:
            raise ConfigError(f"unknown {name} setting(s): {', '.join(sorted(bad))}")
        kw[name] = cls(**{k: _section_value(name, k, v) for k, v in value.items()})
    unknown = set(raw) - {f.name for f in dataclasses.fields(BenchConfig)}
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    cfg = BenchConfig(**kw)
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
    d, mp = cfg.ddp, cfg.model_parallel
    if (
        d.params < 1000
        or d.batch_per_rank < 2
        or d.accum < 2
        or d.powersgd_rank < 1
        or any(not b > 0 for b in d.buckets_mb + d.bucket_fractions)
    ):
        bad(
            f"bad DDP settings {d}: need DDP_PARAMS >= 1000, DDP_BATCH >= 2 (BatchNorm), "
            "DDP_ACCUM >= 2, DDP_POWERSGD_RANK >= 1, DDP_BUCKETS_MB and DDP_BUCKET_FRACTIONS > 0"
        )
    if set(d.hooks) - set(DDP_HOOK_NAMES):
        bad(
            f"DDP_HOOKS {','.join(d.hooks)}: unknown hook(s) {', '.join(sorted(set(d.hooks) - set(DDP_HOOK_NAMES)))}; "
            f"choose from {', '.join(DDP_HOOK_NAMES)}"
        )
    if min(mp.in_features, mp.out_features, mp.batch) < 1:
        bad(f"MP_IN, MP_OUT and MP_BATCH must be >= 1, got {mp}")
    if min(mp.stage_features, mp.microbatch_rows) < 1:
        bad(f"MP_STAGE_FEATURES and MP_MICROBATCH_ROWS must be >= 1, got {mp}")
    if mp.stage_features > 16384 or mp.microbatch_rows * mp.stage_features > 1 << 28:
        bad(
            f"MP_STAGE_FEATURES={mp.stage_features} x MP_MICROBATCH_ROWS={mp.microbatch_rows} is too large "
            "(a stage's weight is d x d float32: d <= 16384; a micro-batch at most 2^28 elements)"
        )
    if cfg.placement.fake_nodes < 0:
        bad(f"SUITE_FAKE_NODES must be >= 0, got {cfg.placement.fake_nodes}")
    doc = cfg.doctor
    if not (4 <= doc.small_bytes <= doc.large_bytes) or not doc.collective_bytes or min(doc.collective_bytes) < 4:
        bad(
            f"DOCTOR_SMALL_BYTES ({doc.small_bytes}) must be >= 4 and <= DOCTOR_LARGE_BYTES ({doc.large_bytes}); "
            f"DOCTOR_SIZES ({','.join(map(str, doc.collective_bytes))}) non-empty, each >= 4"
        )
    if doc.large_bytes * doc.window > 1 << 30:
        bad(f"DOCTOR_LARGE_BYTES x DOCTOR_WINDOW = {doc.large_bytes * doc.window} B is more than 1 GiB in flight")
    if not 1 <= doc.window <= 64:
        bad(f"DOCTOR_WINDOW must be in 1..64, got {doc.window}")
    if not 1 <= doc.compute_ms <= 1000:
        bad(f"DOCTOR_COMPUTE_MS must be in 1..1000, got {doc.compute_ms}")
    if doc.expect_link_rate and _link_rate_gbps(doc.expect_link_rate) is None:
        bad(f"EXPECT_LINK_RATE={doc.expect_link_rate!r} is not a rate (examples: 10gbit, 200mbit, 125mbps)")
    if cfg.backend == "nccl" and cfg.device == "cpu":
        bad("backend nccl needs DEVICE=cuda; use BACKEND=gloo for CPU tensors")
    check_timing_mode(cfg.timing_mode, cfg.backend, cfg.device)


def _link_rate_gbps(text: str):
    from suite.model.fit import parse_link_rate  # numpy: imported only when a rate is given

    return parse_link_rate(text)


def check_timing_mode(timing_mode: str, backend: str, device: str) -> None:
    """cuda_graph captures NCCL work in a CUDA graph: CPU tensors and Gloo/MPI/UCC
    cannot be captured. Called with the knobs as given (auto passes) and again by
    the launcher's preflight with auto resolved."""
    if timing_mode == "cuda_graph" and (device == "cpu" or backend not in ("auto", "nccl")):
        raise ConfigError(
            f"TIMING=cuda_graph needs BACKEND=nccl and DEVICE=cuda (got {backend} on {device}); "
            "use TIMING=blocking or pipelined on CPU/Gloo"
        )
