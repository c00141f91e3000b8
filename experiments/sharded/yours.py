"""A case's model of your own (``SHARDED_MODEL``, experiments/sharded/user_model.py): what the case declares of it
and what it models of its steps. The built-in model's counterpart: built_in.BuiltIn."""

from __future__ import annotations

import dataclasses

from suite.api import Bytes

from . import pipeline, pipeline_train, train, user_model
from .settings import ShardedSettings
from .strategies import get as strategy_of
from .user_model import UserModel


@dataclasses.dataclass(frozen=True)
class Yours:
    """A case's model of your own: ``um``, what SHARDED_MODEL's factory returned (loaded once on each rank), and
    ``s`` the settings (``s.model`` its name); no theory of its collectives (not modelled), a pipeline's messages
    from its pieces (pipeline_train.theory). The built-in model's counterpart: built_in.BuiltIn."""

    um: UserModel
    s: ShardedSettings

    def model(self) -> UserModel:
        return self.um

    def n_params(self) -> int:
        return train.n_params(self.um)

    def cannot_run(self, strategy: str, world: int) -> str | None:
        return user_model.cannot_run(self.um, strategy, world, self.s.microbatches)

    def theory(self, strategy: str, world: int) -> list[dict] | None:
        if strategy in pipeline.PIPELINES:
            return pipeline_train.theory(self.um, strategy, world, self.s.microbatches)
        return None

    def declared(self, strategy: str, world: int, time_includes: str) -> tuple[dict, Bytes, dict, dict]:
        """The case's (identity, byte model, fields, provenance) that are the model's: its name, size and splits
        (what make predict checks divides at another world size), no byte model but a pipeline's messages
        (experiments/sharded/pipeline_train.py), its stages."""
        um, m = self.um, self.s.microbatches
        identity = {"model": self.s.model}
        fields = {
            "n_params": train.n_params(um),
            "check": "every rank's whole parameters equal single-process training of the model on its global "
            "batches (check_rule)",
            "splits": user_model.splits(um, strategy),
        }
        dtype = "bfloat16+float32" if strategy_of(strategy).bf16 else "float32"
        nbytes = Bytes(
            size_bytes=0, count=0, dtype=dtype, bw_op=None, definition=train.NOT_MODELLED, time_includes=time_includes
        )
        if strategy not in pipeline.PIPELINES:
            return identity, nbytes, fields, {}
        sent = pipeline_train.boundaries(um, strategy, world, m)  # once: it runs the pieces
        fields |= pipeline_train.declared_fields(strategy, um, world, m, sent)
        nbytes = pipeline_train.step_bytes(sent, world, m, time_includes)
        return identity, nbytes, fields, pipeline.PROVENANCE | pipeline_train.PROVENANCE
