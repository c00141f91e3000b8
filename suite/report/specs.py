"""What the experiments' specs tell the report: a hook or setting by experiment name, with a default for an
experiment this checkout does not have (an older run's)."""

from __future__ import annotations

from suite import registry


def spec_value(experiment: str, attr: str, default):
    """An experiment's spec hook or setting; ``default`` for an experiment this checkout does not have."""
    spec = registry.spec(experiment)
    return default if spec is None else getattr(spec, attr)


def library_collectives(experiment) -> bool:
    """Whether an experiment's sweeps time the library's own collectives (its spec says so)."""
    return bool(spec_value(str(experiment), "library_collectives", False))
