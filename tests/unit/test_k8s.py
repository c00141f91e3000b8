"""make k8s: the TrainJob and JobSet manifests of a run, checked against the custom resources' own schemas
(suite/deploy/k8s/schemas/), and the checks shown to catch planted mistakes. No cluster is involved anywhere."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from suite.deploy.k8s import cli, render, validate
from tests.conftest import ROOT

VENV = Path(sys.executable).parent.parent
MAKE = ["make", "-s", "--no-print-directory", "-o", f"{VENV}/.installed", f"VENV={VENV}"]
"""`make` with this interpreter's environment as the venv (never rebuilt by the test)."""


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MAKE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def _render(capsys, *argv: str) -> dict:
    """python -m suite.deploy.k8s in this process (what make k8s runs), its one document parsed."""
    assert cli.main(["--nproc", "8", "--run-id", "r1", *argv]) == 0, capsys.readouterr().err
    return yaml.safe_load(capsys.readouterr().out)


def _container(doc: dict) -> dict:
    if doc["kind"] == "TrainJob":
        return doc["spec"]["trainer"]
    return doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def _pod(doc: dict) -> dict:
    if doc["kind"] == "TrainJob":
        job = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    else:
        job = doc["spec"]["replicatedJobs"][0]
    return job["template"]["spec"]["template"]["spec"]


# --- the manifests validate ----------------------------------------------------------------------


@pytest.mark.parametrize("nnodes", [1, 2, 16])
@pytest.mark.parametrize("kind", ["trainjob", "jobset"])
def test_manifests_of_1_2_and_16_nodes_validate(capsys, kind, nnodes):
    doc = _render(capsys, "--kind", kind, "--nnodes", str(nnodes), "--experiments", "collectives", "--", "-k", "x")
    assert validate.errors(doc) == []
    c = _container(doc)
    args = c["args"]
    launch = args[args.index("python") :]
    assert launch[:3] == ["python", "-m", "suite.launch"]
    # make bench-gpu's launch: NCCL on CUDA, one rank per GPU; the place from the PET_* variables
    for flag, value in [("--backend", "nccl"), ("--device", "cuda"), ("--nproc", "8"), ("--results-root", "/results")]:
        assert launch[launch.index(flag) + 1] == value
    assert launch[launch.index("--node-rank") + 1] == "$(PET_NODE_RANK)"
    assert launch[-3:] == ["--", "-k", "x"]
    assert (args[0] == "/opt/suite/docker/await-host.sh") == (nnodes > 1)  # waits for node 0's name
    pod = _pod(doc)
    mounts = {m["mountPath"]: m["name"] for m in (c if kind == "jobset" else pod["containers"][0])["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert volumes[mounts["/results"]]["persistentVolumeClaim"]["claimName"] == "torch-comm-suite-results"
    gpus = c["resources" if kind == "jobset" else "resourcesPerNode"]["limits"]["nvidia.com/gpu"]
    assert gpus == 8
    if kind == "jobset":
        job = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert (job["parallelism"], job["completions"], job["completionMode"]) == (nnodes, nnodes, "Indexed")
        env = {e["name"]: e for e in c["env"]}
        assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == render.INDEX_FIELD
        assert env["PET_MASTER_ADDR"]["value"] == "r1-node-0-0.r1"
    else:
        assert (doc["spec"]["trainer"]["numNodes"], doc["spec"]["runtimeRef"]) == (
            nnodes,
            {"name": "torch-distributed"},
        )


def test_make_k8s_writes_the_manifest_of_the_image_make_image_builds(tmp_path):
    """What a user types: the file validates, and names the image `make image VARIANT=full` builds."""
    out = _make("k8s", "NNODES=2", "GPUS=4", "RUN_ID=run-2", f"K8S_OUT={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert f"kubectl apply -f {tmp_path}/run-2.yaml" in out.stderr
    doc = yaml.safe_load((tmp_path / "run-2.yaml").read_text())
    assert validate.errors(doc) == []
    built = _make("-n", "image", "VARIANT=full", "PIP_PYTHON=python3").stdout
    assert f"IMAGE={doc['spec']['trainer']['image']} VARIANT=full " in built


def test_make_k8s_job_doctor_is_a_short_doctor_run():
    out = _make("k8s", "KIND=jobset", "JOB=doctor", "NNODES=2", "RUN_ID=doc-1")
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    assert validate.errors(doc) == []
    args = _container(doc)["args"]
    last = {
        flag: args[len(args) - 1 - args[::-1].index(flag) + 1] for flag in ("--experiments", "--iters", "--budget-s")
    }
    assert last == {"--experiments": "doctor", "--iters": "10", "--budget-s": "0"}  # make doctor's iterations
    assert doc["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] == 900
    assert doc["metadata"]["labels"]["app.kubernetes.io/component"] == "doctor"


def test_the_pods_get_nccl_settings_and_the_experiments_knobs(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    monkeypatch.setenv("DDP_BUCKETS_MB", "25")
    monkeypatch.setenv("UNRELATED", "x")
    env = {e["name"]: e["value"] for e in _container(_render(capsys, "--nnodes", "2"))["env"]}
    assert env == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0", "DDP_BUCKETS_MB": "25"}


# --- bad knobs: one line, exit 2, nothing written ---------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--kind", "pytorchjob"], "KIND='pytorchjob': choose trainjob or jobset"),
        (["--job", "dcotor"], "JOB='dcotor': choose bench or doctor"),
        (["--max-bytes", "nope"], "not a byte size: 'nope'"),
        (["--experiments", "nosuch"], "unknown experiment(s) nosuch"),
        (["--shm", "256m"], "K8S_SHM='256m' is not a Kubernetes quantity"),
        (["--name", "x" * 60], "exceeds 63 characters"),
        (["--run-id", "a/b"], "RUN_ID 'a/b' must be one name"),
        (["--nproc", "0"], "GPUS='0' must be a positive integer"),
    ],
)
def test_bad_knobs_are_one_line_and_exit_2(capsys, tmp_path, argv, message):
    assert cli.main(["--nnodes", "2", "--nproc", "8", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


# --- planted mistakes fail, naming the path -----------------------------------------------------------


@pytest.fixture(scope="module")
def docs() -> dict:
    spec = dict(nnodes=2, gpus=8, image="i", launch_args=("--nproc", "8"), env=(("NCCL_DEBUG", "WARN"),))
    spec.update(pvc="p", shm="8Gi", rdzv_timeout_s=120, run_id="r", name="r")
    return {kind: fn(render.Spec(kind=kind, **spec)) for kind, fn in render.RENDER.items()}


def _planted(doc: dict, path: str, action) -> list[str]:
    bad = copy.deepcopy(doc)
    *parents, last = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", path) if p]
    node = bad
    for p in parents:
        node = node[p]
    action(node, last)
    return validate.errors(bad, "planted")


def _rename(new):
    return lambda node, key: node.__setitem__(new, node.pop(key))


def _set(value):
    return lambda node, key: node.__setitem__(key, value)


def _drop(node, key):
    del node[key]


POD = "spec.replicatedJobs[0].template.spec.template.spec"
PATCH = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"


@pytest.mark.parametrize(
    "kind, path, action, expected",
    [
        (
            "trainjob",
            "spec.trainer.args",
            _rename("arsg"),
            "planted: spec.trainer: Additional properties are not allowed ('arsg' was unexpected)",
        ),
        (
            "trainjob",
            "spec.trainer.numNodes",
            _set("two"),
            "planted: spec.trainer.numNodes: 'two' is not of type 'integer'",
        ),
        ("trainjob", "spec.runtimeRef", _drop, "planted: spec: 'runtimeRef' is a required property"),
        (
            "trainjob",
            f"{PATCH}.volumes[0].emptyDir",
            _rename("emptydir"),
            f"planted: {PATCH}.volumes[0]: Additional properties are not allowed ('emptydir' was unexpected)",
        ),
        (
            "trainjob",
            "spec.runtimePatches[0].manager",
            _drop,
            "planted: spec.runtimePatches[0]: 'manager' is a required property",
        ),
        (
            "trainjob",
            "metadata.labels",
            _rename("lables"),
            "planted: metadata: Additional properties are not allowed ('lables' was unexpected)",
        ),
        (
            "jobset",
            f"{POD}.containers[0].volumeMounts",
            _rename("volumeMount"),
            f"planted: {POD}.containers[0]: Additional properties are not allowed ('volumeMount' was unexpected)",
        ),
        (
            "jobset",
            "spec.replicatedJobs[0].template.spec.parallelism",
            _set([2]),
            "planted: spec.replicatedJobs[0].template.spec.parallelism: [2] is not of type 'integer'",
        ),
        ("jobset", f"{POD}.containers[0].name", _drop, f"planted: {POD}.containers[0]: 'name' is a required property"),
        (
            "jobset",
            f"{POD}.volumes[1].persistentVolumeClaim.claimName",
            _drop,
            f"planted: {POD}.volumes[1].persistentVolumeClaim: 'claimName' is a required property",
        ),
        (
            "jobset",
            f"{POD}.containers[0].resources.limits",
            _set({"nvidia.com/gpu": [8]}),
            f"planted: {POD}.containers[0].resources.limits.nvidia.com/gpu: [8] is not valid under any of the given "
            "schemas",
        ),
        ("jobset", "metadata.name", _set("Run_1"), "planted: metadata.name: 'Run_1' does not match"),
    ],
)
def test_planted_mistakes_fail_naming_the_path(docs, kind, path, action, expected):
    found = _planted(docs[kind], path, action)
    assert found and found[0].startswith(expected), found


def test_a_manifest_of_another_kind_is_refused_by_name():
    (err,) = validate.errors({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}, "old")
    assert err.startswith("old: apiVersion 'kubeflow.org/v1' kind 'PyTorchJob' has no schema here")


def test_the_first_refusal_is_the_message_with_a_count_of_the_rest(docs):
    bad = copy.deepcopy(docs["trainjob"])
    bad["spec"]["trainer"].update(numNodes="two", numProcPerNode="eight")
    with pytest.raises(
        validate.ManifestError, match=r"^x: spec\.trainer\.num\w+: '\w+' is not of type 'integer' \(and 1 more\)$"
    ):
        validate.check(bad, "x")


# --- the schemas: their source, and OpenAPI v3 read as the API server reads it --------------------------


@pytest.mark.parametrize("name", sorted(set(validate.KINDS.values())))
def test_each_schema_names_its_source(name):
    src = validate.source(name)
    assert src["repository"].startswith("https://github.com/") and src["path"].endswith(".yaml")
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and re.fullmatch(r"v\d+\.\d+\.\d+", src["version"])
    assert validate.KINDS[f"{src['apiVersion']}/{src['kind']}"] == name


def test_trainers_torch_distributed_runtime_validates_and_has_what_the_trainjob_patches():
    """The runtime as Trainer ships it (tests/data/k8s/): the job and container the TrainJob's patch names."""
    runtime = yaml.safe_load((ROOT / "tests" / "data" / "k8s" / "torch-distributed.yaml").read_text())
    assert validate.errors(runtime) == []
    assert runtime["metadata"]["name"] == render.RUNTIME and "torch" in runtime["spec"]["mlPolicy"]
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == render.NODE
    assert job["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert [c["name"] for c in job["template"]["spec"]["template"]["spec"]["containers"]] == [render.NODE]


def test_structural_rules_translate_to_json_schema():
    import jsonschema

    schema = validate.structural(
        {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
                "note": {"type": "string", "nullable": True},
                "obj": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"kind": {}}},
            },
        }
    )
    ok = jsonschema.Draft4Validator(schema)
    assert ok.is_valid({"port": 8080, "free": {"a": 1, "b": 2}, "note": None, "obj": {"kind": "Pod", "spec": {}}})
    assert ok.is_valid({"port": "http"})
    assert not ok.is_valid({"port": 1.5})
    assert not ok.is_valid({"prot": 1})  # structural: an unknown key is refused
    assert not ok.is_valid({"note": 3})


def test_an_image_no_cluster_can_pull_is_named_and_image_takes_another(tmp_path):
    out = _make("k8s", "NNODES=2", "RUN_ID=run-3")  # the default: the image make image builds, in no registry
    assert out.returncode == 0, out.stderr
    assert "# warning: IMAGE=torch-comm-suite:latest names no registry" in out.stderr
    assert "make k8s IMAGE=" in out.stderr and yaml.safe_load(out.stdout)["kind"] == "TrainJob"  # stdout: YAML alone
    out = _make("k8s", "NNODES=2", "RUN_ID=run-3", "IMAGE=registry.example.com/tcs:cuda-1")
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
    assert _container(yaml.safe_load(out.stdout))["image"] == "registry.example.com/tcs:cuda-1"
