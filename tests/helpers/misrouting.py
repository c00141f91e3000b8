"""The misrouting plant's cases that move one element (a wrong route cannot show in one value)."""

from __future__ import annotations


ONE_ELEMENT = {"control-signal", "control-ready_go"}
"""One one-element message from one sender: there is no other place to deliver it to. (With three
or more ranks ready_go's root receives several, and a swap is seen: tests/dist/test_misrouting_dist.py.)"""
