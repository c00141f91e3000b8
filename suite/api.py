"""The core's public API for experiments: the one module of ``suite`` that ``experiments/<name>/`` imports
(rule R2, tests/unit/test_import_graph.py). Everything else in ``suite/`` may move without an experiment
noticing; what is here is the contract.

    from suite.api import Buffers, Bytes, Case, experiment_test, verify

Each name is a re-export, loaded from its home module (``HOMES``) each time it is asked for (the import
system's own cache makes that a dictionary lookup; nothing is cached here, rule R7), so that an
experiment's ``__init__.py`` importing ``ExperimentSpec`` from here stays as light as before (reading
the specs -- reports, ``make compare`` -- imports no torch). No logic lives here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

MODULES = (
    # Exact checks and the shared workloads: the collective op table, p2p patterns, p2p algorithms.
    "suite.harness.verify",
    # The check rule the training experiments share: SGD steps against single-process training.
    "suite.harness.sgd_rule",
    "suite.ops.collectives",
    "suite.ops.sweep",
    "suite.ops.p2p",
    "suite.ops.algorithms",
    # The small training workloads more than one experiment trains (the article's model and data, the MLP).
    "suite.ops.models",
    # A model of your own (SHARDED_MODEL): what its factory returns, its loader and reproducibility check.
    "suite.ops.user_model",
    # Process groups beyond the world (lanes, subgroups, a one-rank group): their one home.
    "suite.harness.groups",
    # The suite's MPI process group (BACKEND=mpi): its communicator and numpy views, for a bare mpi4py call.
    "suite.harness.mpi.group",
    # The host, read without starting a group: environment, NUMA and PCIe, interfaces and routes, pinning.
    "suite.system.sysinfo",
    "suite.system.topology",
    "suite.system.network",
    "suite.system.affinity",
    # Offline statistics and figures (report sections, verdicts).
    "suite.metrics",
    "suite.report.plots",
    "suite.report.figures",
    "suite.report.rank_plots",
    # The online fail-slow watch of a training case's steps (attach).
    "suite.watch.watch",
)
"""Modules re-exported whole, each under its last name (``suite.api.verify``, ``suite.api.groups``) or the one
``EXPORTED_AS`` gives it."""

EXPORTED_AS = {"suite.harness.mpi.group": "mpi_backend"}
"""A module of MODULES exported under a name other than its last: the contract's name, kept where the module's
own (the MPI package's ``group``) would say less on its own."""

NAMES: dict[str, str] = {
    # Declaring an experiment: its __init__.py's SPEC and the hooks it names lazily (suite/case.py).
    "ExperimentSpec": "suite.case",
    "collected": "suite.case",
    "later": "suite.case",
    "module_doc": "suite.case",
    # The case protocol: what cases.py declares and workload.py builds (suite/case.py).
    "Case": "suite.case",
    "Timing": "suite.case",
    "Bytes": "suite.case",
    "Buffers": "suite.case",
    "Session": "suite.case",
    "experiment_test": "suite.case",
    "restorer": "suite.case",
    "each": "suite.case",
    "wait_all": "suite.case",
    "support_reason": "suite.case",
    "CaseSkipped": "suite.case",
    "CaseFailed": "suite.case",
    "NeedsRanks": "suite.case",
    # The run's configuration, and the error a settings validator raises (exit 2 before any rank starts).
    "BenchConfig": "suite.common.config",
    "ConfigError": "suite.errors",
    # On a rank: the process group's context, reductions over ranks, device rules, calibration, memory.
    "DistContext": "suite.harness.dist",
    "dist_max": "suite.harness.dist",
    "dist_min": "suite.harness.dist",
    "resolve_device": "suite.common.backends",
    "PreflightError": "suite.common.backends",
    # The backends' records: what each can run and how (suite/common/backends/).
    "record_of": "suite.common.backends",
    "backend_records": "suite.common.backends",
    "autorange": "suite.harness.autorange",
    "PeakMemory": "suite.harness.profiling",
    "sequence_number": "suite.harness.c10d",
    # Two cases' time ratio and its bootstrap interval (make compare's within-run bootstrap), on a rank or offline.
    "ratio_interval": "suite.report.compare.stats",
    # An experiment's text table: the shared cells and layouts (suite/report/tables.py).
    "by_table": "suite.report.tables",
    "collective_table": "suite.report.tables",
    "pivot": "suite.report.tables",
    "num": "suite.report.tables",
    "tail_cell": "suite.report.tables",
    "wrong": "suite.report.tables",
    "wrong_cell": "suite.report.tables",
    "iters_label": "suite.report.tables",
    "DTYPE_SHORT": "suite.report.tables",
    # Offline, from a stored run (report sections, verdicts; never on a rank): records, figures, statistics.
    "load_run": "suite.results",
    "records": "suite.results",
    "write_json_atomic": "suite.common.fileio",
    "Clause": "suite.report.headline",
    "pingpong_records": "suite.report.headline",
    "time_ratio": "suite.report.headline",
    "fmt_bytes": "suite.report.environment",
    "Plot": "suite.report.sections",
    "Section": "suite.report.sections",
    "Picture": "suite.report.glance",
    "configured_link_rate": "suite.model.link_rate",
    "declared_link_rate": "suite.model.link_rate",
    "parse_link_rate": "suite.model.link_rate",
    "EXIT_OK": "suite.common.failures",
    "EXIT_FAILED": "suite.common.failures",
    "EXIT_BAD_INPUT": "suite.common.failures",
    "EXIT_WRONG_RESULT": "suite.common.failures",
    "EXIT_FINDING": "suite.common.failures",
    # The compose simulation's containers, from the host (fault injection at the node level).
    "docker": "suite.inject.effects",
    "container_of": "suite.inject.host",
}
"""Names re-exported from a module: public name -> its home module (the name is the same there)."""

HOMES = {EXPORTED_AS.get(m, m.rsplit(".", 1)[-1]): m for m in MODULES} | NAMES
"""Every public name -> its home module."""

__all__ = sorted(HOMES)


if TYPE_CHECKING:  # the same names, imported for static tools (type checkers, import graphs); never run
    # tests/unit/test_api.py keeps this block equal to MODULES and NAMES
    from suite.harness import verify
    from suite.harness import sgd_rule
    from suite.ops import collectives
    from suite.ops import sweep
    from suite.ops import p2p
    from suite.ops import algorithms
    from suite.ops import models
    from suite.ops import user_model
    from suite.harness import groups
    from suite.harness.mpi import group as mpi_backend
    from suite.system import sysinfo
    from suite.system import topology
    from suite.system import network
    from suite.system import affinity
    from suite import metrics
    from suite.report import plots
    from suite.report import figures
    from suite.report import rank_plots
    from suite.watch import watch
    from suite.case import (
        Buffers,
        Bytes,
        Case,
        CaseFailed,
        CaseSkipped,
        ExperimentSpec,
        NeedsRanks,
        Session,
        Timing,
        collected,
        each,
        experiment_test,
        later,
        module_doc,
        restorer,
        support_reason,
        wait_all,
    )
    from suite.errors import ConfigError
    from suite.harness.autorange import autorange
    from suite.harness.c10d import sequence_number
    from suite.harness.dist import DistContext, dist_max, dist_min
    from suite.harness.profiling import PeakMemory
    from suite.common.config import BenchConfig
    from suite.common.failures import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_FINDING, EXIT_OK, EXIT_WRONG_RESULT
    from suite.common.fileio import write_json_atomic
    from suite.common.backends import PreflightError, backend_records, record_of, resolve_device
    from suite.model.link_rate import configured_link_rate, declared_link_rate, parse_link_rate
    from suite.report.environment import fmt_bytes
    from suite.report.glance import Picture
    from suite.report.headline import Clause, pingpong_records, time_ratio
    from suite.report.compare.stats import ratio_interval
    from suite.report.sections import Plot, Section
    from suite.report.tables import (
        DTYPE_SHORT,
        by_table,
        collective_table,
        iters_label,
        num,
        pivot,
        tail_cell,
        wrong,
        wrong_cell,
    )
    from suite.results import load_run, records
    from suite.inject.effects import docker
    from suite.inject.host import container_of


def __getattr__(name: str):
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"suite.api has no {name!r} (the public names are suite.api.__all__)")
    module = importlib.import_module(home)
    return getattr(module, name) if name in NAMES else module


def __dir__() -> list[str]:
    return __all__
