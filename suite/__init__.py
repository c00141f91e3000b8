"""The core of the distributed-communication experiment suite; it names no experiment.

Grouped by where the code runs (rule R3, tests/unit/test_import_graph.py):
- ``harness/`` on every rank: the one runner, timing, exact checks, process groups, the op journal,
  the pytest glue;
- ``watch/`` on every rank too: the training cases' online fail-slow watch (their steps' own times, a
  change-point detector);
- ``ops/`` the shared workloads the ranks run: the collective op table, the p2p patterns, the algorithms;
- ``system/`` reads the host (NUMA, network, memory, the environment) and starts no group;
- ``launch/`` on the host, before and around torchrun: knobs, preflight, supervision;
- ``postmortem/`` reads a run's folder when its ranks end or hang: the hang diagnosis, the merged trace;
- ``deploy/`` a run as files for elsewhere (Kubernetes manifests), from the launcher's checked knobs;
- ``inject/`` on the host beside torchrun: a seeded fail-slow applied to one rank mid-run, its truth sealed;
- ``report/`` and ``model/`` offline, from stored JSON: reports, comparisons, fits and predictions.
Shared by every role: ``api`` (the one module experiments import), ``case`` (the case protocol and
``ExperimentSpec``), ``registry`` (the experiments of this checkout), ``measurement`` (a case's samples, as
the timing loop returns them), ``results`` (the record built from them), ``metrics`` (pure bandwidth math),
``op_table`` (every torch.distributed function the suite times or journals, one row each: names and plain data)
and ``errors``.
CONTRIBUTING.md's code tour lists every module (tests/unit/test_contributing.py).
"""

__version__ = "0.1.0"
