"""The manifests of a run on Kubernetes, as plain data (pure: no cluster, no files).

Both kinds run the same pod on every node: the CUDA image's entry point, then ``python -m suite.launch`` with
NCCL on the node's GPUs, exactly as ``make bench-gpu`` runs it on one host, its node rank and rendezvous from
the ``PET_*`` variables that Kubeflow Trainer's torch plugin injects (a plain JobSet sets the same ones
itself: the rank from the Job's completion index, node 0's address from JobSet's pod DNS names).

- ``trainjob``: a ``TrainJob`` (trainer.kubeflow.org/v1alpha1) on the ``torch-distributed``
  ClusterTrainingRuntime; its runtime patch adds the volumes to the runtime's job ``node``, container ``node``.
- ``jobset``: a ``JobSet`` (jobset.x-k8s.io/v1alpha2) of one Indexed Job of NNODES pods.
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIME = "torch-distributed"
"""Kubeflow Trainer's ClusterTrainingRuntime for torchrun jobs."""
NODE = "node"
"""The runtime's replicated job and container that train (``constants.Node`` in Trainer): JobSet uses it too."""
PORT = 29500
"""Node 0's rendezvous port (Trainer's ``ContainerTrainerPort``)."""
RESULTS_MOUNT = "/results"
"""Where the results volume is mounted: the image's RESULTS."""
FS_GROUP = 1000
"""The pods' supplementary group, given the volumes (fsGroup): the image's non-root user writes the results."""
MANAGER = "torch-comm-suite"
"""The TrainJob's runtime patch's owner (runtimePatches[].manager)."""
PET = ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
"""What the launch reads its place from: Trainer's torch plugin injects them; the JobSet sets them."""


@dataclass(frozen=True, kw_only=True)
class Spec:
    """One run's manifests: every value already validated (suite/deploy/k8s/cli.py)."""

    kind: str
    """``trainjob`` or ``jobset``."""
    name: str
    """The object's name (a DNS label): node 0's pod is ``<name>-node-0-0``."""
    nnodes: int
    gpus: int
    """GPUs per node = ranks per node (``nvidia.com/gpu``)."""
    image: str
    launch_args: tuple[str, ...]
    """``python -m suite.launch`` options and ``-- pytest args``, without the node's place."""
    env: tuple[tuple[str, str], ...]
    """The container's environment: NCCL_*, the experiments' knobs."""
    pvc: str
    """The results volume: a PersistentVolumeClaim every node mounts (ReadWriteMany)."""
    shm: str
    """/dev/shm's size (a Kubernetes quantity): a memory emptyDir."""
    rdzv_timeout_s: int
    run_id: str
    """The run's directory on the results volume."""
    job: str = "bench"
    """``bench`` (the suite) or ``doctor`` (the health check alone): a label."""
    deadline_s: int | None = None
    """activeDeadlineSeconds of the run (None: none)."""


def launch_command(spec: Spec) -> list[str]:
    """The container's arguments (after the image's entry point): wait for node 0's name, then the launch;
    ``$(VAR)`` is the kubelet's expansion of the container's environment."""
    place = [
        "--nnodes",
        "$(PET_NNODES)",
        "--node-rank",
        "$(PET_NODE_RANK)",
        "--master-addr",
        "$(PET_MASTER_ADDR)",
        "--master-port",
        "$(PET_MASTER_PORT)",
        "--rdzv-timeout-s",
        str(spec.rdzv_timeout_s),
    ]
    opts, sep, rest = _split(list(spec.launch_args))
    cmd = ["python", "-m", "suite.launch", *place, *opts, *sep, *rest]
    if spec.nnodes > 1:  # node 0's DNS name appears once its pod exists: the other nodes may start first
        cmd = ["/opt/suite/docker/await-host.sh", "$(PET_MASTER_ADDR)", str(spec.rdzv_timeout_s), *cmd]
    return cmd


def _split(args: list[str]) -> tuple[list[str], list[str], list[str]]:
    if "--" in args:
        i = args.index("--")
        return args[:i], ["--"], args[i + 1 :]
    return args, [], []


def _env(spec: Spec) -> list[dict]:
    return [{"name": k, "value": v} for k, v in spec.env]


def _volumes(spec: Spec) -> list[dict]:
    return [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm}},
        {"name": "results", "persistentVolumeClaim": {"claimName": spec.pvc}},
    ]


MOUNTS = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "results", "mountPath": RESULTS_MOUNT}]


def _resources(spec: Spec) -> dict:
    return {"limits": {"nvidia.com/gpu": spec.gpus}}


def _meta(spec: Spec) -> dict:
    return {
        "name": spec.name,
        "labels": {"app.kubernetes.io/name": "torch-comm-suite", "app.kubernetes.io/component": spec.job},
        "annotations": {
            "torch-comm-suite/run-id": spec.run_id,
            "torch-comm-suite/results": f"{spec.pvc}:/{spec.run_id}",
        },
    }


def trainjob(spec: Spec) -> dict:
    """The TrainJob: the trainer's image, command, environment and GPUs; the volumes by a runtime patch."""
    trainer = {
        "image": spec.image,
        "args": launch_command(spec),
        "env": _env(spec),
        "numNodes": spec.nnodes,
        "numProcPerNode": spec.gpus,
        "resourcesPerNode": _resources(spec),
    }
    pod = {
        "securityContext": {"fsGroup": FS_GROUP},
        "volumes": _volumes(spec),
        "containers": [{"name": NODE, "volumeMounts": MOUNTS}],
    }
    patch = {
        "template": {"spec": {"replicatedJobs": [{"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}]}}
    }
    body = {
        "runtimeRef": {"name": RUNTIME},
        "trainer": trainer,
        "runtimePatches": [{"manager": MANAGER, "trainingRuntimeSpec": patch}],
    }
    if spec.deadline_s is not None:
        body["activeDeadlineSeconds"] = spec.deadline_s
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta(spec), "spec": body}


def jobset(spec: Spec) -> dict:
    """The JobSet: one Indexed Job of NNODES pods; a failed pod fails the run (no restarts)."""
    place = [
        {"name": "PET_NNODES", "value": str(spec.nnodes)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}},
        # JobSet's pod DNS names: <jobset>-<replicated job>-<job index>-<pod index>.<subdomain = jobset>
        {"name": "PET_MASTER_ADDR", "value": f"{spec.name}-{NODE}-0-0.{spec.name}"},
        {"name": "PET_MASTER_PORT", "value": str(PORT)},
    ]
    container = {
        "name": NODE,
        "image": spec.image,
        "args": launch_command(spec),
        "env": place + _env(spec),
        "ports": [{"containerPort": PORT}],
        "resources": _resources(spec),
        "volumeMounts": MOUNTS,
    }
    pod = {
        "restartPolicy": "Never",
        "securityContext": {"fsGroup": FS_GROUP},
        "containers": [container],
        "volumes": _volumes(spec),
    }
    job = {
        "parallelism": spec.nnodes,
        "completions": spec.nnodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": {"spec": pod},
    }
    if spec.deadline_s is not None:
        job["activeDeadlineSeconds"] = spec.deadline_s
    body = {
        "failurePolicy": {"maxRestarts": 0},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [{"name": NODE, "replicas": 1, "template": {"spec": job}}],
    }
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(spec), "spec": body}


INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
"""An Indexed Job's pod index (what Trainer's torch plugin reads PET_NODE_RANK from, too)."""

RENDER = {"trainjob": trainjob, "jobset": jobset}
