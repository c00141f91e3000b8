"""Kubernetes manifests of a run (``make k8s``): a Kubeflow Trainer TrainJob or a plain JobSet, rendered from
the suite's knobs (render.py, cli.py) and checked against the custom resources' schemas (validate.py)."""
