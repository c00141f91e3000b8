"""What the tests share: groups, runs, records and checks that more than one test module (or tier) uses. A test
module imports from here, never from another test module (tests/unit/test_tiers.py holds that)."""
