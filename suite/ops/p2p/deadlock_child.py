"""One process of the deadlock probe pair (suite/ops/p2p/deadlock.py starts two, with
``python -m suite.ops.p2p.deadlock_child --deadlock-child ...``).

No module of the suite imports this one: run as ``-m``, a module the package had already imported would run
twice (the unit tests import it for ``payload``).
"""

from __future__ import annotations

import datetime
import sys
import time

import torch
import torch.distributed as dist

from suite.common.backends import record_of
from suite.harness import verify
from suite.ops.algorithms import ORDERINGS, exchange
from suite.ops.p2p.deadlock import TAG


PAYLOAD_PERIOD = 1 << 23
"""The pair's payloads repeat every this many elements (``payload``): below it every value of both processes is
distinct, and exact in float32 (at most 2^24)."""


def payload(rank: int, count: int, device="cpu"):
    """What process ``rank`` of the pair sends: ``count`` float32 values, index i holding
    ``rank x PAYLOAD_PERIOD + i mod PAYLOAD_PERIOD + 1``, built with ``arange`` (the harness's hashed pattern
    (suite/harness/verify.py ``pattern``) took a third of a second at 16 MiB on an idle host, seconds on a loaded
    one, twice per process before it could say ``ready``). What the pair checks is whether each exchange delivered
    the peer's message whole and in place, not a reduction's arithmetic: distinct values per index and per process
    show a missing, stale, shifted or crossed element as well. A size's payload is the first elements of a
    larger size's."""
    base = rank * PAYLOAD_PERIOD + 1
    period = torch.arange(base, base + min(count, PAYLOAD_PERIOD), dtype=torch.float32, device=device)
    return period if count <= PAYLOAD_PERIOD else period.repeat(-(-count // PAYLOAD_PERIOD))[:count]


def _probe_child(
    rank: int, port: int, backend: str, device: str, big: int, sizes: list[int], timeout_s: float, delay: str = "-"
) -> None:
    """One process of the probe pair (``python -m suite.ops.p2p.deadlock_child --deadlock-child ...``)."""
    dev = torch.device("cuda", rank) if device == "cuda" else torch.device("cpu")
    kw = {"device_id": dev} if record_of(backend).one_gpu_per_rank else {}
    if device == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=timeout_s),
        **kw,
    )
    peer, dt = 1 - rank, torch.float32
    delay_step, _, delay_s = delay.partition(":")

    def say(*words) -> None:
        print(TAG, *words, flush=True)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # NCCL's send/recv block the stream, not the CPU

    def maybe_delay(step: str) -> None:
        nonlocal delay_step
        if rank == 1 and step == delay_step:
            delay_step = ""  # once
            time.sleep(float(delay_s))

    # Every step's input and expected output is built before "ready": the parent's no-progress clock
    # runs between lines, and building 16 MiB on a loaded host must not read as a stall. A payload's value
    # depends on (rank, element index) only, so each size's data is the first elements of the largest: built
    # once per rank, with arange (``payload`` above; the harness's hashed pattern took seconds on a loaded host).
    counts = {size: max(1, size // 4) for size in (big, *sizes)}
    most = max(counts.values())
    mine_all, want_all = payload(rank, most, dev), payload(peer, most, dev)
    mine = {size: mine_all[:c] for size, c in counts.items()}
    want = {size: want_all[:c] for size, c in counts.items()}
    say("ready")
    for ordering in ORDERINGS:
        r = torch.full((counts[big],), -1, dtype=dt, device=dev)
        maybe_delay(ordering)
        t0 = time.perf_counter()
        exchange(mine[big], r, peer, peer, ordering=ordering)
        sync()
        say(ordering, big, verify.count_wrong(r, want[big]), f"{time.perf_counter() - t0:z.6f}")
    for size in sizes:
        r = torch.full((counts[size],), -1, dtype=dt, device=dev)
        maybe_delay("naive")
        dist.send(mine[size], peer)  # both ranks send first: the deadlock under test
        dist.recv(r, peer)
        sync()
        say("naive", size, verify.count_wrong(r, want[size]))
    say("done")
    dist.destroy_process_group()


def _main(argv: list[str]) -> int:
    if len(argv) == 9 and argv[0] == "--deadlock-child":
        _, rank, port, backend, device, big, sizes, timeout_s, delay = argv
        _probe_child(
            int(rank), int(port), backend, device, int(big), [int(s) for s in sizes.split(",")], float(timeout_s), delay
        )
        return 0
    print(
        "usage: python -m suite.ops.p2p.deadlock_child --deadlock-child RANK PORT BACKEND DEVICE BIG SIZES TIMEOUT_S "
        "DELAY\n"
        "(internal: one process of the deadlock probe pair; run the experiment with suite.launch.cli)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
