"""Offline performance models: the time of every collective, and of an experiment's training step, at
N ranks from a small run (``python -m suite.model``: make predict, make validate-predict), and the α–β fits of a
stored run's series (``fit``).

Reads stored runs only (bench.json); measures nothing, starts no process group.

Modules: ``fit`` (α–β lines, and where they earn a model), ``ring`` (the ring model over one link), ``link_rate``
(one figure per link of a run, LINK_RATE), ``links`` (link
classes, topology, the ``Term`` of a critical path), ``algorithms`` and ``posted_tree`` (op -> Terms per algorithm),
``prediction`` (Terms -> time, interval, bottleneck), ``backend_choice`` (which algorithm the backend
runs), ``runs`` (points of a stored run), ``calibrate`` (links fitted to a run), ``run_model`` (what a
run says, the algorithm check), ``step`` (the protocol of an experiment's step model: the
experiment's ``model.py`` behind its spec's ``step_model`` hook, e.g. experiments/ddp/model.py), ``contention``
(a step's compute where ranks outnumber cores: the probe at N, not an extrapolation),
``document`` (tables, predict.json), ``report_section`` (the report's section),
``validate``, ``cli``, ``units``; and, apart from the rest, ``ettr`` (ETTR under failures, its Monte-Carlo
check ``ettr_sim``, its command ``ettr_cli``: make ettr; docs/recovery.md).

**Link classes.** Ranks sit ``ranks_per_node`` to a node, node by node (torchrun's numbering).
A message between two ranks of one node crosses an *intra*-node link, between nodes an
*inter*-node link; each class has its own Hockney α–β (suite/model/fit.py). Inter-node flows that
leave (or enter) one node at the same time share its link: f flows of b bytes cost α + f·b/β.

**Models** (S = nccl-tests' buffer size of the op, suite/metrics.py; n ranks, P per node,
m = n/P nodes; one class written α, β; with two classes every step costs what its slowest
class costs). Each is a sum of ``Term`` s (α count and bytes over one β, per link class):

- ``ring`` — Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations
  in MPICH", IJHPCA 2005 (ring all_gather, reduce_scatter = ring reduce-scatter, all_reduce =
  reduce-scatter + all-gather, Patarasuk & Yuan JPDC 2009) and the pipelined chain broadcast
  (Chan et al., "Collective communication: theory, practice, and experience", CCPE 2007; NCCL's
  ring broadcast). The coefficients are suite.model.fit's ring model (``fit.ring_coefficients``:
  all_reduce 2(n−1)α + 2(n−1)/n·S/β; all_gather, reduce_scatter (n−1)α + (n−1)/n·S/β; broadcast
  (n−1)α + S/β); node-contiguous ring order puts one flow on each node's link.
- ``pairwise`` (all_to_all) — n−1 shifted exchanges of S/n (Thakur et al. 2005 §all-to-all;
  suite.model.fit's all_to_all line): (n−1)α + (n−1)/n·S/β on one link; with P ranks per node the step
  of shift k puts min(k, n−k, P) flows on a node's link.
- ``tree`` — broadcast: binomial tree, ⌈log2 n⌉ rounds of the whole buffer, ⌈log2 n⌉(α + S/β)
  (Chan et al. 2007 "MST broadcast"; Thakur et al. 2005 short-message broadcast); all_reduce:
  NCCL's pipelined double binary tree, 2((P−1)α_intra + ⌊log2 m⌋α_inter) + 2·S/β (NCCL
  src/graph/tuning.cc ``ncclTopoTuneModel``: tree latency 2·((nRanks/nNodes−1)·intraLat +
  log2i(nNodes)·interLat), algbw = busBw × 0.5; Sanders, Speck, Träff, "Two-tree algorithms for
  full bandwidth broadcast, reduction and scan", Parallel Computing 2009); barrier: gather +
  release over a binomial tree, 2⌈log2 n⌉α.
- ``halving_doubling`` — recursive halving / doubling (Thakur et al. 2005; Rabenseifner, ICCS
  2004): all_reduce = reduce-scatter by recursive halving + all-gather by recursive doubling,
  2·log2 n·α + 2(n−1)/n·S/β; all_gather (recursive doubling) and reduce_scatter (recursive
  halving) log2 n·α + (n−1)/n·S/β; broadcast = binomial scatter + recursive-doubling all-gather
  (van de Geijn), 2·log2 n·α + 2(n−1)/n·S/β. For n not a power of two the extra ranks first fold
  into the largest power of two below n and are answered after it (Thakur et al. 2005 §4): one
  step each way, of the whole buffer for all_reduce, of the whole buffer in and the extra rank's
  chunk S/n out for reduce_scatter, the reverse for all_gather, and the whole buffer out only for
  broadcast (``FOLD_BYTES``). Partners at distance ≥ P are on other nodes, all P ranks of
  a node at once: the node link carries P flows.
- ``hierarchical`` — intra + inter (two-level; the 2D ring of hierarchical all-reduce, e.g.
  Horovod's and NCCL's intra-node/inter-node split): all_reduce = intra reduce-scatter ring
  ((P−1)α_i + (P−1)/P·S/β_i), P concurrent inter all_reduce rings of S/P (2(m−1)α_e +
  2(m−1)/m·S/β_e on the node link), intra all-gather ring; all_gather = inter then intra ring,
  reduce_scatter = intra then inter ring; broadcast = chain over the nodes then within each.
  (suite/ops/algorithms.py's hierarchical_all_reduce is the reduce → leaders → broadcast variant.)
- ``posted_tree`` (broadcast) — Gloo's binomial tree as gloo/broadcast.cc runs it: a rank that has
  the data posts the sends to all its children at once, so they share its link; with one rank per
  node its c children finish α + c·S/β after it (the path 0 → 1 → 3 → 7 … costs (log2 n) + … + 1
  times S/β: 3 S/β at 4 ranks where round-by-round rounds take 2), with several ranks per node a
  fluid simulation of the shared node links.
- ``allreduce_slice`` (reduce_scatter) — an all_reduce of the whole S (ring), then each rank
  copies its chunk out: what torch's ProcessGroupGloo does for reduce_scatter_tensor.
- ``dissemination`` (barrier) — ⌈log2 n⌉ rounds, rank r signals r + 2^k (Hensgen, Finkel,
  Manber, "Two algorithms for barrier synchronization", IJPP 1988).

The **bottleneck** of a prediction is its largest single component: the α or the β part of
one link class ("bandwidth-bound, inter-node" ...).

**Which algorithm the backend runs** is found out (``backend_algorithm``), never taken for
granted: Gloo's choice per op is read from its sources (the ``GLOO`` table, each entry citing
the file) and *checked* against the run (``check_algorithms``: every candidate fitted to the
measured (n, S) points; with two or more world sizes the n-scaling tells them apart); NCCL's
from ``NCCL_ALGO`` (records carry ``nccl_algo``) and from its debug lines ("AllReduce: 4096 Bytes
-> Algo Tree proto LL ..." with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, in a record's
``nccl_debug`` or in RUN/*.log). The predictions of that algorithm are marked.

**Link parameters** (``run_links``): per class the run's link figure (suite.model.link_rate.link_figures:
the streaming probe's fitted rate and the same pair's one-way latency, with bootstrap 95% intervals; the
declared rate across hosts where given), the figure every reader of the run's link uses; and per op, the
link that makes the backend's algorithm reproduce that op's own measured series (``calibrate``: the implied link of
suite.model.fit.implied_link, generalised to any algorithm and to several world sizes; the same
weighted fit and bootstrap, on per-step time against per-step bytes). An op is predicted over
its own calibrated link; ops the run did not measure over the point-to-point link, else the
median of the calibrated ones. A class the run never crossed (a one-host run has no inter-node
link) is taken equal to the other, and the output says so. The interval of a predicted time is
the model at the slow and fast ends of the links' intervals (time grows with α and falls with
β, so these bound it).

**DDP step at N** (``predict_ddp``): compute = the no-op-hook DDP step measured in the run (DDP's
whole machinery, no communication); communication = the all_reduce model over the buckets DDP
built (``bucket_sizes``, one after another); hidden = the share of the gradient all_reduce the
run hid (``overlap_saved_ms / allreduce_ms``, clamped to [0, 1]) of the modelled communication, at
most the backward compute it can hide under; step = compute + communication − hidden; scaling
efficiency = t(solo step) / step (per-rank batch fixed, as the ddp experiment defines it).
"""
