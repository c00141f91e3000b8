"""Experiments, one folder each (``experiments/<name>/``, found by ``suite.registry.discover``)."""
