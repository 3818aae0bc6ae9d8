"""Partitioners with torch's ``partition_fn`` signature, backed by the Rust core.

``(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs) -> (fw_module, bw_module)``:
they work inside aotgrad and as ``partition_fn`` of torch's own
``functorch.compile.aot_function``.
"""

from __future__ import annotations

from .api import (
    PartitionResult,
    default_partition,
    min_cut_rematerialization_partition,
    partition_joint,
)
from .budget import (
    BudgetExceededWarning,
    BudgetPoint,
    frontier,
    memory_budget_joint,
    memory_budget_partition,
    recompute_costs,
)

__all__ = [
    "BudgetExceededWarning",
    "BudgetPoint",
    "PartitionResult",
    "default_partition",
    "frontier",
    "memory_budget_joint",
    "memory_budget_partition",
    "min_cut_rematerialization_partition",
    "partition_joint",
    "recompute_costs",
]
