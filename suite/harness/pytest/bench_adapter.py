"""The one place the suite touches pytest-benchmark's private API.

pytest-benchmark times its own calls; it has no public way to accept samples taken
elsewhere (``pedantic`` still runs its own timer around the target), and the
suite's samples are cross-rank maxima taken by ``suite.harness.timing.measure``. So this
adapter builds the fixture's stats object itself (``BenchmarkFixture._make_stats``)
and fills it with the harness's samples, and turns off the session's own saving on
non-zero ranks (``BenchmarkSession.save/autosave/json/compare_fail``). Both are
private: ``check_version`` refuses any version but the one this was written and
tested against (tests/unit/test_bench_adapter.py round-trips a sample set).
"""

from __future__ import annotations

from collections.abc import Sequence

SUPPORTED_VERSION = "5.3.1"
"""The pytest-benchmark release whose private fields this adapter uses (pinned in requirements.txt)."""


class UnsupportedVersion(RuntimeError):
    pass


def check_version(version: str | None = None) -> None:
    """Raise UnsupportedVersion unless pytest-benchmark is the supported release."""
    if version is None:
        import pytest_benchmark

        version = pytest_benchmark.__version__
    if version != SUPPORTED_VERSION:
        raise UnsupportedVersion(
            f"pytest-benchmark {version} is installed; the suite supports {SUPPORTED_VERSION} exactly "
            "(it hands its own samples to pytest-benchmark's private stats API): "
            f"pip install pytest-benchmark=={SUPPORTED_VERSION}"
        )


UNUSED_FIXTURE = "ignore:Benchmark fixture was not used at all:pytest_benchmark.logger.PytestBenchmarkWarning"
"""A ``filterwarnings`` line: pytest-benchmark's warning that a test left its fixture unused, which every case the
suite interrupts, fails or skips for another rank does (the suite says what became of the case; the warning would
only repeat it in pytest-benchmark's words)."""


def store_samples(benchmark, samples_s: Sequence[float], ops_per_sample: int, *, group: str, extra: dict) -> None:
    """Record externally timed samples on a ``benchmark`` fixture.

    Each stored round is one sample (``ops_per_sample`` ops), so pytest-benchmark's
    stats, which divide a round by its iterations, equal the per-op samples.
    """
    benchmark._mode = "suite.harness.timing.measure"
    stats = benchmark._make_stats(ops_per_sample)
    for s in samples_s:
        stats.update(s * ops_per_sample)
    benchmark.group = group
    benchmark.extra_info.update(extra)


def silence_session(config) -> None:
    """Turn off pytest-benchmark's own saving (--benchmark-autosave/-save/-json) in this process."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is not None:
        bs.save = bs.autosave = False
        bs.json = None
        bs.compare_fail = []


def session(config):
    """pytest-benchmark's session object of this pytest run, or None when the plugin is off."""
    return getattr(config, "_benchmarksession", None)
