"""The unit tier's in-process ranks compute as the launcher's ranks do: with one ATen intra-op thread
(``python -m suite.launch`` sets OMP_NUM_THREADS=1, torchrun's default). With the default pool (one thread
per core) the in-process DDP and reference training steps spin for cores the rest of the machine is using:
on a loaded 2-core machine they took several times the CPU time and wall time of one thread.

``COLLECTED``: the node ids this session collected, before ``-k``/``-m`` deselect any (the README's test count is
checked against it: tests/unit/test_front_page.py). ``link_figure``: the link figure the report's unit tests set
their numbers against.

``ctx``: a one-rank Gloo group in this process for a test module (tests/helpers/inprocess.py ``lone_group``)."""

import pytest
import torch

from tests.helpers.inprocess import CFG, lone_group

COLLECTED: list[str] = []


def link_figure(**changes):
    """A measured Gloo/CPU link of 2 ranks, 0->1: 1 GB/s in [0.9, 1.1], 20 µs one way; ``changes`` replace fields
    (suite.model.link_rate.LinkFigure)."""
    from suite.model.link_rate import LinkFigure

    base = dict(backend="gloo", device="cpu", world_size=2, src=0, dst=1, link_class="intra", measured=True)
    base |= dict(beta_gbps=1.0, beta_ci_gbps=(0.9, 1.1), alpha_us=20.0, alpha_ci_us=None)
    return LinkFigure(**base | dict(source="p2p window 0->1, α–β fit", alpha_source="") | changes)


def pytest_configure(config):
    torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    COLLECTED[:] = [item.nodeid for item in items]


@pytest.fixture(scope="module")
def ctx():
    with lone_group(CFG) as c:
        yield c
