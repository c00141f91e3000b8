"""The online fail-slow watch of the training runs (suite/watch/detect.py: the change-point detector)."""
