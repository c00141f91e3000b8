"""The CUDA image, built here without any registry but the package index, checked without a GPU.

`make image VARIANT=full BASE_IMAGE=local` is what a user on a host that cannot pull runs: the
local Debian base (docker/build-base.sh), ./wheelhouse-cuda filled from the package index with the
CUDA build of the pinned torch and its NVIDIA wheels (docker/wheelhouse.sh), an offline install.
A second run with the same inputs reuses Docker's layer cache (seconds, not minutes). The checks
are the ones a GPU is not needed for: a CUDA torch with NCCL and Gloo inside, labels that say so,
the suite's NCCL preflight refusing cleanly on a host without GPUs, and the environment's unit tests plus
a Gloo run passing inside the image. Runs in `make test` and alone as `make test-cuda-image`.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from tests.conftest import ROOT
from tests.helpers.docker import run_container, run_docker, output_of, make_image

# cold: ~3 min for the image (+1 min for the base where it is missing); the timeout covers the
# fixture's build, which runs inside the first test
pytestmark = [pytest.mark.docker, pytest.mark.cuda_image, pytest.mark.slow, pytest.mark.timeout(2400)]

CUDA_IMAGE = os.environ.get("CUDA_IMAGE", "torch-comm-suite:cuda")
PIN = re.search(r"^torch==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def cuda_image() -> str:
    r = make_image("VARIANT=full", "BASE_IMAGE=local", f"IMAGE={CUDA_IMAGE}", timeout=2200)
    built = [ln for ln in r.stdout.splitlines() if ln.startswith("built ")]
    assert built and re.search(r" in \d+ s: \d+\.\d\d GB$", built[0]), r.stdout[-2000:]
    print(built[0])
    return CUDA_IMAGE


def _wheel_version(name: str) -> tuple[str, str]:
    """(distribution, version) of the one wheel in ./wheelhouse-cuda whose name starts with name."""
    (wheel,) = [p.name for p in (ROOT / "wheelhouse-cuda").glob(f"{name}-*.whl")]
    dist, version = wheel.split("-")[:2]
    return dist, version


def _facts(image: str) -> dict:
    code = (
        "import json, torch, torch.distributed as d; print(json.dumps({'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'nccl': list(torch.cuda.nccl.version()), 'gloo': d.is_gloo_available(), "
        "'nccl_backend': d.is_nccl_available(), 'gpus': torch.cuda.device_count()}))"
    )
    r = run_container("--entrypoint", "python", image, "-c", code)
    assert r.returncode == 0, output_of(r)[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_torch_is_the_cuda_build_with_nccl_and_gloo(cuda_image):
    """What is inside is what the wheelhouse held: the pinned torch built for CUDA, NCCL's version
    from the nvidia-nccl wheel, and both backends compiled in; no GPU is visible here."""
    f = _facts(cuda_image)
    nccl_dist, nccl_version = _wheel_version("nvidia_nccl_cu*")
    cuda_major = re.fullmatch(r"nvidia_nccl_cu(\d+)", nccl_dist).group(1)
    assert f["torch"].split("+")[0] == PIN and not f["torch"].endswith("+cpu"), f
    assert f["cuda"] and f["cuda"].split(".")[0] == cuda_major, f
    assert ".".join(map(str, f["nccl"])) == nccl_version, (f, nccl_version)
    assert f["gloo"] is True and f["nccl_backend"] is True, f
    assert f["gpus"] == 0, "this check runs the container without GPUs"


def test_labels_record_torch_cuda_and_nccl(cuda_image):
    f = _facts(cuda_image)
    info = json.loads(run_docker("image", "inspect", "-f", "{{json .}}", cuda_image).stdout)
    labels = info["Config"]["Labels"]
    assert labels["suite.variant"] == "full"
    assert labels["suite.torch.version"] == PIN
    assert labels["suite.torch.build"] == f["torch"]
    assert labels["suite.cuda.version"] == f["cuda"]
    assert labels["suite.nccl.version"] == ".".join(map(str, f["nccl"]))
    assert labels["org.opencontainers.image.base.name"] == "torch-comm-suite-base:bookworm"
    size_gb = info["Size"] / 1e9
    print(f"{cuda_image}: {size_gb:.2f} GB; torch {f['torch']}, CUDA {f['cuda']}, NCCL {labels['suite.nccl.version']}")
    # the CUDA libraries are inside (the CPU image is ~1.2 GB)
    assert size_gb > 3, f"{size_gb:.2f} GB is too small for torch's CUDA libraries"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--backend", "nccl", "--device", "cuda"], "preflight failed: DEVICE=cuda but no CUDA device is visible"),
        (["--backend", "nccl"], "preflight failed: backend nccl needs CUDA tensors and a GPU"),
    ],
)
def test_nccl_preflight_fails_cleanly_without_gpus(cuda_image, args, message):
    """The documented status 3 and one line that says what to change, in seconds, and nothing
    started or written."""
    cmd = (
        "python -m suite.launch --nproc 2 " + " ".join(args) + " --results-root /tmp/r; rc=$?; "
        "[ ! -e /tmp/r ] || echo 'the failed preflight left /tmp/r' >&2; exit $rc"
    )
    t0 = time.monotonic()
    r = run_container(cuda_image, "sh", "-c", cmd)
    elapsed = time.monotonic() - t0
    assert r.returncode == 3, output_of(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), r.stderr
    assert r.stdout == ""
    assert elapsed < 30, f"the preflight took {elapsed:.0f} s"


def test_make_bench_gpu_refuses_without_gpus(cuda_image):
    r = run_container(cuda_image, "make", "-s", "bench-gpu")
    assert r.returncode == 2, output_of(r)
    assert "error: torch sees no CUDA GPU" in r.stderr, output_of(r)


def test_exact_checks_and_a_gloo_run_pass_inside(cuda_image):
    """The CUDA torch runs the CPU side too: the unit tests of what depends on torch's own kernels (the exact
    expected values in every dtype, the backends' capabilities and lanes) and a 2-rank Gloo run. The rest of the
    unit tier is the same Python on another torch build, which the host's unit tier runs, and `make test-cpu` in
    full was run by hand here (docs/containers.md)."""
    cmd = (
        "python -m pytest -q -x -p no:cacheprovider tests/unit/test_verify.py tests/unit/test_backends.py && "
        "make -s bench-cpu NPROC=2 EXPERIMENTS=collectives MAX_BYTES=4K ITERS=3 WARMUP=1 TABLES=1 RESULTS=/tmp/r "
        "K=all_reduce-sum && python -c \"import json; r = json.load(open('/tmp/r/latest/bench.json')); "
        "print('records', {(b['extra_info']['backend'], b['extra_info']['device']) for b in r['benchmarks']})\""
    )
    r = run_container(cuda_image, "sh", "-c", cmd, timeout=900)
    assert r.returncode == 0, output_of(r)[-4000:]
    summary = [ln for ln in r.stdout.splitlines() if re.search(r"\d+ passed", ln)]
    assert summary and " failed" not in summary[-1], r.stdout[-3000:]
    assert "# all_reduce" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "records {('gloo', 'cpu')}", r.stdout[-2000:]
