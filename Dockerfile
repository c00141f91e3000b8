# The suite in an image: `make bench-gpu` on a GPU host, node of the compose simulation, CI.
#
#   make image                                  # picks the base, fills the wheelhouse where needed, builds
#   make image VARIANT=full BASE_IMAGE=local    # the CUDA image offline: local Debian base + CUDA wheels
#   docker build -t torch-comm-suite .          # default: public PyTorch CUDA runtime base (NCCL inside)
#   docker build --build-arg BASE_IMAGE=torch-comm-suite-base:bookworm --build-arg VARIANT=slim .
#
# Written for the legacy builder too (hosts without BuildKit): no `# syntax=` line (it would pull a
# frontend image), no RUN --mount, no heredocs.
#
# Build arguments
#   BASE_IMAGE     any image with python3 (+venv). Its own torch is kept when it has one (PyTorch
#                  images); otherwise torch==TORCH_VERSION is installed.
#   VARIANT        full (default) | slim: full insists on a CUDA build of torch with NCCL (GPU hosts),
#                  slim on a CPU-only torch (laptops, the simulation).
#   WHEELHOUSE_URL a directory of wheels served over HTTP (docker/image.sh serves ./wheelhouse-cuda on
#                  the host's loopback and builds with --network host): pip installs offline from it.
#                  Empty: the wheels in ./wheelhouse of the build context, else the network.
#   TORCH_VERSION  the pinned torch (requirements.txt); recorded in the labels.
#   GIT_COMMIT     the suite's commit, written to GIT_COMMIT (suite.system.sysinfo reads it; no .git inside).
ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime

# ---- stage 1: the Python environment (wheels stay in this stage) --------------------------------
FROM ${BASE_IMAGE} AS venv
ARG VARIANT=full
ARG WHEELHOUSE_URL=
# lets `make image` find this stage's superseded copies of the same variant (they are the build
# cache, left untagged)
LABEL suite.stage=venv suite.stage.variant=${VARIANT}
USER root
# `wheelhouse*` matches nothing when the host made no wheelhouse (then pip uses the network); a plain
# `COPY wheelhouse/` would fail the build in that case.
COPY requirements.txt wheelhouse* /tmp/build/
# --system-site-packages: a base image's own torch (and its CUDA/NCCL build) stays visible.
# torch is installed only when the base lacks it; pip goes offline when the wheelhouse holds wheels.
RUN set -eu; \
    python3 -m venv --system-site-packages /opt/venv; \
    cd /tmp/build; \
    if [ -n "$WHEELHOUSE_URL" ]; then \
      echo "installing offline from the wheelhouse at $WHEELHOUSE_URL"; \
      set -- --no-index --find-links "$WHEELHOUSE_URL"; \
    elif ls ./*.whl >/dev/null 2>&1; then \
      echo "installing offline from the wheelhouse ($(find . -maxdepth 1 -name "*.whl" | wc -l) wheels)"; \
      set -- --no-index --find-links /tmp/build; \
    else set --; fi; \
    if /opt/venv/bin/python -c "import torch" 2>/dev/null; then \
      echo "base image provides torch $(/opt/venv/bin/python -c 'import torch; print(torch.__version__)')"; \
      grep -v -E '^torch([=<>~! ;]|$)' requirements.txt > req.txt; \
    else cp requirements.txt req.txt; fi; \
    /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check "$@" -r req.txt; \
    /opt/venv/bin/python -c "import torch, numpy, pytest, pytest_benchmark, torch.distributed as d; assert d.is_gloo_available()"; \
    if [ "$VARIANT" = slim ]; then \
      /opt/venv/bin/python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else 'VARIANT=slim needs a CPU-only torch, but this one is built for CUDA ' + torch.version.cuda + ': use a base image without torch and a CPU wheel (wheelhouse or CPU wheel index)')"; \
    else \
      /opt/venv/bin/python -c "import sys, torch, torch.distributed as d; sys.exit(0 if torch.version.cuda and d.is_nccl_available() else 'VARIANT=full needs a CUDA build of torch with NCCL, but this is torch ' + torch.__version__ + ': use a PyTorch CUDA base image or the CUDA wheelhouse (make image VARIANT=full), or VARIANT=slim')"; \
    fi; \
    rm -rf /tmp/build

# ---- stage 2: the runtime image -----------------------------------------------------------------
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG VARIANT=full
ARG TORCH_VERSION=2.13.0
# GIT_COMMIT (the revision label) is declared after the copy of the venv: a new commit must not
# invalidate that layer (5 GB for the CUDA variant, minutes to copy again).
LABEL org.opencontainers.image.title="torch-comm-suite" \
      org.opencontainers.image.description="Measure, verify and explain torch.distributed communication" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      suite.variant="${VARIANT}" \
      suite.torch.version="${TORCH_VERSION}"
USER root
# tc (iproute2) shapes the simulated links, make runs the suite's targets, sshd and ssh let hydra's
# mpiexec start the ranks of BACKEND=mpi on the other compose nodes. The local Debian base has them
# all; a public base may not: installed with apt where apt works, else a warning (no network needed
# when they are present). No ssh key is baked in: the host keys the package made are removed (each
# node makes its own at start) and the job's key pair is made per run (docker/entrypoint.sh).
RUN set --; \
    command -v tc >/dev/null || set -- "$@" iproute2; \
    command -v make >/dev/null || set -- "$@" make; \
    [ -x /usr/sbin/sshd ] || set -- "$@" openssh-server; \
    command -v ssh >/dev/null || set -- "$@" openssh-client; \
    if [ $# -gt 0 ]; then \
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         "$@" >/dev/null && rm -rf /var/lib/apt/lists/*) || \
      echo "WARNING: $* missing and not installable: LINK_RATE (tc), make targets (make) or BACKEND=mpi across compose nodes (ssh) will not work"; \
    fi; \
    rm -f /etc/ssh/ssh_host_*
# A fixed non-root account; compose runs the entrypoint as root only to shape the link (and start
# sshd for BACKEND=mpi), then drops to the owner of the results directory (docker/entrypoint.sh).
# Its password field is '*' (no password, not locked): sshd refuses a locked account ('!') even with a key.
RUN useradd --create-home --shell /bin/sh --user-group --password '*' suite
COPY --from=venv /opt/venv /opt/venv
# VENV: the Makefile's venv is this one (so `make test-cpu` inside the image installs nothing);
# RESULTS: where make targets and the node entrypoint write runs (mount a host directory there);
# MPIR_CVAR_CH4_CMA_ENABLE=0: BACKEND=mpi's ranks on one node copy through shared memory, not with
# cross-memory attach, whose process_vm_readv a container refuses (EPERM) without CAP_SYS_PTRACE.
ENV PATH=/opt/venv/bin:$PATH \
    MPIR_CVAR_CH4_CMA_ENABLE=0 \
    VENV=/opt/venv \
    RESULTS=/results \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SUITE_VARIANT=${VARIANT}
WORKDIR /opt/suite
COPY pyproject.toml requirements.txt requirements-dev.txt Makefile README.md CONTRIBUTING.md CHANGELOG.md Dockerfile docker-compose.yml docker-compose.gpu.yml ./
COPY mk/ mk/
COPY suite/ suite/
COPY experiments/ experiments/
COPY tests/ tests/
COPY docker/ docker/
COPY scripts/ scripts/
COPY examples/ examples/
COPY docs/ docs/
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.revision="${GIT_COMMIT}"
# VERSIONS: what is really inside (the base's torch may differ from TORCH_VERSION; the label says
# what was asked for, this file what was found).
RUN set -eu; \
    echo "${GIT_COMMIT}" > GIT_COMMIT; \
    touch /opt/venv/.installed; \
    python -c "import platform, torch, numpy, pytest, pytest_benchmark as pb; nccl = '.'.join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None; print(f'python {platform.python_version()}\ntorch {torch.__version__} (cuda {torch.version.cuda})\nnccl {nccl}\nnumpy {numpy.__version__}\npytest {pytest.__version__}\npytest-benchmark {pb.__version__}')" > VERSIONS; \
    cat VERSIONS; \
    mkdir -p /results results; \
    chown suite:suite /results results; \
    chmod 0755 docker/*.sh
USER suite
ENTRYPOINT ["/opt/suite/docker/entrypoint.sh"]
CMD ["/opt/suite/docker/node.sh"]
