"""The misrouting check of tests/unit/test_verify_routing.py at 256, 257 and 1024 ranks (every op,
dtype and reduce op; tens of seconds, so not in the unit tier)."""

import pytest

from tests.unit.test_verify_routing import SCALE_WORLDS, check_routing


@pytest.mark.parametrize("n", SCALE_WORLDS)
def test_wrong_routing_changes_the_expected_output_at_scale(n):
    check_routing(n)
