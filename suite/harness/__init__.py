"""Code that runs on every rank; other modules join it later."""
