"""``fsdp2_bf16``: ``fsdp2`` with ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``: the
all_gathers move bfloat16, the reduce_scatters float32."""

from ..theory import fsdp_theory
from ..strategy import Strategy

STRATEGY = Strategy(
    name="fsdp2_bf16",
    what="`fsdp2` with `MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`",
    data="its rows",
    fsdp=True,
    param_dtype="bfloat16",
    exact_at_two=True,
    theory=fsdp_theory(reshard=True, gather_dtype="bfloat16"),
)
