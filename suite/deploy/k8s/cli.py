"""``python -m suite.deploy.k8s`` (``make k8s``): a run's Kubernetes manifest from the same knobs as the other
targets, checked by the launcher (``suite.launch --check``, the local run's messages) and against the custom
resource's schema before it is written; a bad knob is one line and exit 2, nothing written.

    python -m suite.deploy.k8s [--kind trainjob|jobset] [--job bench|doctor] [--image I] [--pvc P] [--out DIR|-]
        --nnodes N --nproc GPUS [suite.launch options ...] [-- pytest args]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import re
import sys
from pathlib import Path

from suite.deploy.k8s import render, validate

QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?")
"""A memory size as Kubernetes writes it (256Mi, 8Gi); docker's 256m would be 0.256 bytes there."""
NCCL_DEFAULTS = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}
"""The pod network's interface, and NCCL's warnings in the logs (as docker-compose.gpu.yml sets them)."""


class KnobError(ValueError):
    """A knob make k8s cannot render: one line naming it."""


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    ap = argparse.ArgumentParser(
        prog="python -m suite.deploy.k8s", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    ap.add_argument("--kind", default="trainjob", help="trainjob (Kubeflow Trainer) or jobset (KIND)")
    ap.add_argument("--job", default="bench", help="bench, or an experiment run alone (the doctor) (JOB)")
    ap.add_argument(
        "--image", default="torch-comm-suite:latest", help="the CUDA image, make image VARIANT=full (IMAGE)"
    )
    ap.add_argument("--pvc", default="torch-comm-suite-results", help="results PersistentVolumeClaim (RESULTS_PVC)")
    ap.add_argument("--shm", default=None, help="/dev/shm size, a Kubernetes quantity (K8S_SHM; default 1Gi per GPU)")
    ap.add_argument("--name", default=None, help="the object's name (K8S_NAME; default from the run id)")
    ap.add_argument("--deadline-s", default=None, help="activeDeadlineSeconds (K8S_DEADLINE_S)")
    ap.add_argument("--out", default="-", help="a folder for <name>.yaml, or - for stdout (K8S_OUT)")
    return ap.parse_known_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:  # pytest's own arguments, for the launch: never ours
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i:]
    else:
        passthrough = []
    a, launch = parse_args(argv)
    try:
        spec = build_spec(a, launch + passthrough, os.environ)
        doc = render.RENDER[spec.kind](spec)
        validate.check(doc, f"{spec.kind} {spec.name}")
    except (KnobError, validate.ManifestError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = dump(doc)
    if "/" not in spec.image:  # the default too: what make image builds here, in no registry
        print(
            f"# warning: IMAGE={spec.image} names no registry: a cluster pulls it as docker.io/library/{spec.image}, "
            "which does not exist; push the image make image VARIANT=full builds to a registry the cluster reaches "
            "and name it: make k8s IMAGE=registry.example.com/torch-comm-suite:cuda",
            file=sys.stderr,
        )
    if a.out == "-":
        sys.stdout.write(text)
        return 0
    path = Path(a.out) / f"{spec.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(
        f"# {path}: {doc['kind']} {spec.name}, {spec.nnodes} node(s) x {spec.gpus} GPU(s), image {spec.image}, "
        f"results {spec.pvc}:/{spec.run_id} (kubectl apply -f {path})",
        file=sys.stderr,
    )
    return 0


def build_spec(a: argparse.Namespace, launch: list[str], env) -> render.Spec:
    """The manifest's Spec from our options and the launch's (KnobError naming the knob); the launch options are
    checked by ``suite.launch --check`` with node 0's place in this job."""
    from suite.launch import cli as launch_cli

    kind = _choice(a.kind, render.RENDER, "KIND")
    alone = [n for n in launch_cli.available_experiments() if n not in launch_cli.all_experiments()]
    job = _choice(a.job, ("bench", *alone), "JOB")
    la, passthrough = launch_cli.parse_args(launch)
    nnodes = _count(la.nnodes, "NNODES")
    gpus = _count(la.nproc, "GPUS")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_id = la.run_id or f"k8s-{'' if job == 'bench' else job + '-'}{stamp}"
    name = a.name or name_for(run_id)
    _check_name(name, nnodes)
    shm = a.shm or f"{gpus}Gi"
    if not QUANTITY.fullmatch(shm):
        raise KnobError(f"K8S_SHM={shm!r} is not a Kubernetes quantity (examples: 8Gi, 512Mi)")
    if not a.image.strip() or any(c.isspace() for c in a.image):
        raise KnobError(f"IMAGE={a.image!r} must name one image (e.g. registry.example.com/torch-comm-suite:cuda)")
    if not re.fullmatch(r"[a-z0-9]([-.a-z0-9]*[a-z0-9])?", a.pvc) or len(a.pvc) > 253:
        raise KnobError(f"RESULTS_PVC={a.pvc!r} is not a PersistentVolumeClaim name (lowercase, digits, '-', '.')")
    deadline = _count(a.deadline_s, "K8S_DEADLINE_S") if a.deadline_s not in (None, "") else None
    opts = launch_options(la, run_id)
    _check_launch(opts, passthrough, nnodes, gpus, name)
    return render.Spec(
        kind=kind,
        name=name,
        nnodes=nnodes,
        gpus=gpus,
        image=a.image,
        launch_args=(*opts, *(["--", *passthrough] if passthrough else [])),
        env=tuple(container_env(env).items()),
        pvc=a.pvc,
        shm=shm,
        rdzv_timeout_s=int(float(la.rdzv_timeout_s)),
        run_id=run_id,
        job=job,
        deadline_s=deadline,
    )


def launch_options(la: argparse.Namespace, run_id: str) -> list[str]:
    """The launch's options as the pod gives them, node-independent: NCCL on CUDA (make bench-gpu), results on
    the volume, and every knob that was given (KNOBS: the one table of their flags)."""
    from suite.common.knobs import KNOBS

    opts = ["--nproc", str(la.nproc), "--backend", "nccl", "--device", "cuda", "--experiments", la.experiments]
    for k in KNOBS:
        value = getattr(la, k.field)
        if value is not None and k.field not in ("backend", "device"):
            opts += [f"--{k.flag}", str(value)]
    opts += ["--results-root", render.RESULTS_MOUNT, "--run-id", run_id]
    return [*opts, "--debug"] if la.debug else opts


def _check_launch(opts: list[str], passthrough: list[str], nnodes: int, gpus: int, name: str) -> None:
    """suite.launch --check on node 0's place: its own message (the local run's) as a KnobError."""
    from suite.launch import cli as launch_cli

    place = ["--nnodes", str(nnodes), "--node-rank", "0", "--master-addr", f"{name}-{render.NODE}-0-0.{name}"]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = launch_cli.main([*place, *opts, "--check", "--", *passthrough])
    if rc != 0:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise KnobError((lines[0].removeprefix("error: ") if lines else f"the launcher refused the knobs ({rc})"))


def container_env(env) -> dict[str, str]:
    """The pod's environment from make's: NCCL_* (defaults: NCCL_DEFAULTS), the experiments' knobs and the
    SUITE_* switches that are set."""
    from suite.common.knobs import ENV_KNOBS
    from suite.common.switches import SWITCHES

    out = dict(NCCL_DEFAULTS)
    names = [k.env for k in ENV_KNOBS] + list(SWITCHES)
    for key in sorted(env):
        value = str(env[key]).strip()
        if value and (key.startswith("NCCL_") or key in names):
            out[key] = value
    return out


def name_for(run_id: str) -> str:
    """A DNS label from a run id: lowercase, '-' for anything else, starting with a letter."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    return name if name[:1].isalpha() else f"tcs-{name}"


def _check_name(name: str, nnodes: int) -> None:
    host = f"{name}-{render.NODE}-0-{nnodes - 1}"  # the longest pod name: a DNS label (63)
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
        raise KnobError(f"K8S_NAME={name!r} must be a DNS label: lowercase letters, digits and '-', a letter first")
    if len(host) > 63:
        raise KnobError(
            f"K8S_NAME={name!r} is too long: pod name {host!r} exceeds 63 characters; set a shorter K8S_NAME"
        )


def _choice(value: str, choices, knob: str) -> str:
    if value not in choices:
        raise KnobError(f"{knob}={value!r}: choose {' or '.join(choices)}")
    return value


def _count(value, knob: str) -> int:
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise KnobError(f"{knob}={value!r} must be a positive integer")
    return n


def dump(doc: dict) -> str:
    """One YAML document, keys in the order written (apiVersion, kind, metadata, spec)."""
    import yaml

    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=120)
