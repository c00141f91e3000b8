"""Offline performance models: α–β fits of a stored run's series (``fit``) and the prediction of every
collective, and of a DDP step, at N ranks from a small run (``python -m suite.model``).

Reads stored runs only (bench.json); measures nothing, starts no process group.
"""
