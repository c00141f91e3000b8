"""The pure checks of tests/unit/test_verify.py and tests/unit/test_verify_routing.py at the world sizes
too costly for the unit tier (every op, dtype and reduce op; up to 1024 patterns a case: tens of
seconds in all): expected results stay exact, and wrong routing and p2p message faults stay visible."""

import pytest

from suite.harness import verify
from tests.helpers.verify_exact import SCALE_WORLDS as EXACT_WORLDS
from tests.helpers.verify_exact import check_expected_is_exact, exact_combos
from tests.helpers.verify_routing import SCALE_WORLDS, check_p2p_messages, check_routing


@pytest.mark.parametrize("n", SCALE_WORLDS)
def test_wrong_routing_changes_the_expected_output_at_scale(n):
    check_routing(n)


@pytest.mark.parametrize("dtype,redop,n", list(exact_combos(EXACT_WORLDS)))
def test_expected_is_exact_at_scale(dtype, redop, n):
    check_expected_is_exact(dtype, redop, n)


@pytest.mark.parametrize("dtype", sorted(verify.DTYPE_OF))
def test_p2p_messages_differ_at_1024_ranks(dtype):
    check_p2p_messages(1024, dtype)
