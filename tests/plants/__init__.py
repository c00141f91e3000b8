"""Bugs planted the way real bugs happen, as pytest plugins that the ranks load (``-p tests.plants.<name>``
after the launcher's ``--``); each one is named by the test that must catch it."""
