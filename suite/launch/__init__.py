"""The host side, before and around torchrun: ``cli`` (``python -m suite.launch``), ``preflight`` (checks before
any rank starts), ``warm`` (torchrun started while preflight runs), ``supervise`` (the torchrun process tree),
``hang`` (the hang diagnosis), ``mpi`` (the ranks under mpiexec) and ``k8s`` (Kubernetes manifests). What it shares
with the ranks is suite/common/; it imports no rank code (suite/harness/)."""
