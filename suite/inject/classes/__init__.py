"""One file per injection class, each binding ``CLASS`` (suite/inject/kind.py); suite/inject/registry.py finds
them."""
