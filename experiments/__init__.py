"""Experiment families, one module each, built on ``suite``."""
