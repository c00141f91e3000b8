"""The seeded fail-slow injector: one class of slowdown applied to one rank (or its node) mid-run, from a seeded
plan, with its truth sealed for scoring (docs/inject.md).

  plan.py        INJECT, SEED and INJECT_RUN_S read into one Plan, checked before any rank starts
  kind.py        InjectionClass (what a class is), Target (the rank it acts on) and Node (a compose node)
  registry.py    the classes: every file of classes/ (pause, slow, noisy, membw, cpu; nodecpu, egress), one each
  effects.py     the mechanisms the classes share: a SIGSTOP/SIGCONT duty cycle, pinned busy processes, docker
  launcher.py    the launcher's side: the check, the ranks kept from the knobs, the controller started
  controller.py  the process beside the ranks that applies the injection at its onset and always reverts it
  host.py        the compose simulation's controller on the host: a node's class applied through docker
  truth.py       <run>/truth/: what was injected, where, when and how hard, read only to score a run

It runs on the host beside torchrun: it imports neither the launcher nor the ranks' code."""
