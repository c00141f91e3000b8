"""Manifests checked against the custom resources' own schemas (suite/deploy/k8s/schemas/: each CRD's
``openAPIV3Schema``, with its source repository, path, version and commit), with ``jsonschema``.

An OpenAPI v3 structural schema is JSON Schema (draft 4) plus what Kubernetes adds; ``structural`` translates
that part the way the API server reads it:

- an object with ``properties`` and no ``additionalProperties`` takes no other key. The API server would prune
  an unknown field, and ``kubectl apply`` (server-side field validation, ``--validate=strict``, the default)
  rejects it: here it is an error, so a misspelled key fails;
- ``x-kubernetes-preserve-unknown-fields: true`` keeps any key, ``x-kubernetes-embedded-resource`` objects
  (apiVersion, kind, metadata) too;
- ``x-kubernetes-int-or-string: true``: an integer or a string; ``nullable: true``: null as well.

The top-level ``metadata`` of a custom resource is an ObjectMeta, which the CRD schema leaves to the API
server: here its keys are ObjectMeta's and its name a DNS label of at most 63 characters (the TrainJob CRD's
own rule, which JobSet's pod names need too). CEL rules (``x-kubernetes-validations``) are not evaluated.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parent / "schemas"

KINDS = {
    "trainer.kubeflow.org/v1alpha1/TrainJob": "trainjob",
    "trainer.kubeflow.org/v1alpha1/ClusterTrainingRuntime": "clustertrainingruntime",
    "jobset.x-k8s.io/v1alpha2/JobSet": "jobset",
}
"""apiVersion/kind -> the schema file (suite/deploy/k8s/schemas/<name>.json) that checks it."""

OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        **{k: {} for k in ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp")},
        **{k: {} for k in ("deletionGracePeriodSeconds", "finalizers", "ownerReferences", "managedFields")},
    },
    "additionalProperties": False,
}
"""ObjectMeta's keys (k8s.io/apimachinery meta/v1); the name as the TrainJob CRD's CEL rules spell it."""


class ManifestError(ValueError):
    """A manifest the schemas refuse: the message names the document, the path and what is wrong."""


def structural(schema):
    """``schema`` (an openAPIV3Schema or a part of it) as plain JSON Schema, read as the API server reads it."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k in ("properties", "patternProperties"):  # their values are schemas, their keys field names
            out[k] = {name: structural(sub) for name, sub in v.items()}
        elif not k.startswith("x-kubernetes-") and k != "nullable":
            out[k] = structural(v)
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-embedded-resource")
    if "properties" in out and "additionalProperties" not in out and not keeps_unknown:
        out["additionalProperties"] = False
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def source(name: str) -> dict:
    """Where the schema ``name`` comes from: repository, path, version, commit, apiVersion, kind."""
    return _stored(name)["source"]


@functools.cache
def _stored(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


@functools.cache
def validator(name: str):
    """The jsonschema validator of schema ``name``, built once per process."""
    import jsonschema

    schema = structural(_stored(name)["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META
    schema.setdefault("required", [])
    schema["required"] = sorted({*schema["required"], "apiVersion", "kind", "metadata", "spec"})
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def dotted(path) -> str:
    """A JSON path as a manifest's reader writes it: ``spec.replicatedJobs[0].template``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def errors(doc, where: str = "manifest") -> list[str]:
    """Every reason the schemas refuse ``doc``, one line each (``where: path: what``), deepest path first;
    empty when it is accepted."""
    if not isinstance(doc, dict):
        return [f"{where}: a manifest is a mapping, got {type(doc).__name__}"]
    key = f"{doc.get('apiVersion')}/{doc.get('kind')}"
    if key not in KINDS:
        known = ", ".join(k.rsplit("/", 1)[1] + " (" + k.rsplit("/", 1)[0] + ")" for k in KINDS)
        return [f"{where}: apiVersion {doc.get('apiVersion')!r} kind {doc.get('kind')!r} has no schema here ({known})"]
    found = sorted(
        validator(KINDS[key]).iter_errors(doc), key=lambda e: (-len(e.absolute_path), list(map(str, e.path)))
    )
    return [f"{where}: {dotted(e.absolute_path)}: {e.message}" for e in found]


def check(doc, where: str = "manifest") -> None:
    """ManifestError with the first reason the schemas refuse ``doc`` (and how many more there are)."""
    found = errors(doc, where)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ManifestError(found[0] + more)
