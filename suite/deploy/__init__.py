"""A run taken elsewhere, as files and nothing sent: ``k8s/`` (``make k8s``: the run's Kubernetes manifests, from
the same knobs the launcher checks, validated against the custom resources' vendored schemas). It calls the
launcher's own checks (suite.launch) and imports no rank code (tests/unit/test_import_graph.py)."""
