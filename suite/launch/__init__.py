"""The host side, before and around torchrun: ``cli`` (``python -m suite.launch``; ``argv`` its parser),
``world`` (the experiments and NPROC), ``passes`` (the second pass), ``preflight`` (checks before any rank
starts), ``warm`` (torchrun started while preflight runs), ``supervise`` (the torchrun process tree),
``torchrun_output`` (what torchrun prints) and ``mpi`` (the ranks under mpiexec). What it reads of a run's folder
when the ranks end or hang is suite/postmortem/'s; what it shares with the ranks is suite/common/; it imports no
rank code (suite/harness/)."""
