"""Memory-budget partitioning: save at most ``budget`` x (activation bytes min-cut
saves), recomputing as little as possible by the Rust recompute-cost table
(``rust/core/src/partition/cost.rs``; solver in ``budget.rs`` / ``budget_solve.rs``).

A budget that no valid partition meets raises :class:`aotgrad.errors.PartitionError`
naming the smallest achievable figure, unless ``allow_exceed=True``: then the
partition saving the fewest bytes is used and a :class:`BudgetExceededWarning`
is issued. A budget is never exceeded silently.

Activation bytes are the storage the saved tensors hold, each storage once (a saved
view holds its base's storage; views of one base share it), less the storage of primal
inputs (parameters and inputs the caller holds anyway, and views of them such as
``t(weight)``): the memory a partition adds, and what the budget limits. Compute-intensive ops (matmul, convolution, attention) may be recomputed, at
their FLOP cost (counted from each node's shapes with torch's FLOP formulas,
:func:`node_flops`); random and impure ops and ``MUST_SAVE`` values never are.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import optimization_hint

from .. import _rust
from ..errors import PartitionError
from .api import PartitionResult, _torch_options, joint_table
from .calibration import cost_options

#: Budgets :func:`frontier` sweeps when none are given.
DEFAULT_BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0)


class BudgetExceededWarning(UserWarning):
    """``allow_exceed=True`` and the budget could not be met."""


@dataclass(frozen=True)
class BudgetPoint:
    """One budget's answer: what it saves and what it recomputes."""

    budget: float
    #: every saved tensor, primal inputs included
    saved_bytes: int
    #: the saved tensors' storage, each once, less primal inputs': what the budget limits
    activation_bytes: int
    #: sum of the cost table over the recomputed nodes (bytes moved x op factor)
    recompute_cost: float
    #: min-cut's activation bytes (the reference of ``budget``)
    min_cut_bytes: int
    #: the smallest activation bytes any valid partition achieves
    min_bytes: int
    target_bytes: int
    met: bool
    #: every subset of recompute candidates was evaluated (at most 14 candidates);
    #: otherwise a parametric min cut with greedy repair (its gap to the exact
    #: solver is measured in ``rust/core/src/partition/budget_tests.rs``)
    exact: bool

    @property
    def fraction(self) -> float:
        """Activation bytes as a fraction of min-cut's."""
        return self.activation_bytes / self.min_cut_bytes if self.min_cut_bytes else 0.0


def _point(sol: Any) -> BudgetPoint:
    return BudgetPoint(
        budget=float(sol.budget),
        saved_bytes=int(sol.saved_bytes),
        activation_bytes=int(sol.activation_bytes),
        recompute_cost=float(sol.recompute_cost),
        min_cut_bytes=int(sol.min_cut_bytes),
        min_bytes=int(sol.min_bytes),
        target_bytes=int(sol.target_bytes),
        met=bool(sol.met),
        exact=bool(sol.exact),
    )


def _unmet_message(p: BudgetPoint) -> str:
    frac = p.min_bytes / p.min_cut_bytes if p.min_cut_bytes else 0.0
    return (
        f"budget {p.budget:g} cannot be met: the smallest achievable is {p.min_bytes} bytes "
        f"({frac:.2f} of min-cut's {p.min_cut_bytes} activation bytes)"
    )


def _store(joint_module: fx.GraphModule, num_fwd_outputs: int) -> tuple[Any, list[fx.Node]]:
    table, nodes = joint_table(joint_module, num_fwd_outputs)
    return _rust.GraphStore.from_table(table), nodes


def _hint(v: Any) -> float:
    try:
        return float(v)
    except TypeError:  # symbolic: its hint, without adding guards
        return float(optimization_hint(v, fallback=0))


def node_flops(nodes: Sequence[fx.Node]) -> np.ndarray:
    """float64[N]: the FLOPs of each node-table row, from its ``meta["val"]`` shapes by
    torch's FLOP formulas (``torch.utils.flop_counter.flop_registry``: matmuls,
    convolutions, attention); 0 for every other op (the Rust cost table prices those
    by bytes moved) and where a shape is unknown (Rust then estimates from byte sizes)."""
    from torch.utils.flop_counter import flop_registry

    out = np.zeros(len(nodes), dtype=np.float64)
    for i, n in enumerate(nodes):
        if n.op != "call_function":
            continue
        count = flop_registry.get(getattr(n.target, "overloadpacket", None))
        if count is None:
            continue
        try:
            args, kwargs = pytree.tree_map_only(
                fx.Node, lambda a: a.meta["val"], (n.args, n.kwargs)
            )
            out[i] = max(_hint(count(*args, **kwargs, out_val=n.meta["val"])), 0.0)
        except Exception:  # no shapes here: Rust estimates from byte sizes
            out[i] = 0.0
    return out


def memory_budget_joint(
    joint_module: fx.GraphModule,
    *,
    num_fwd_outputs: int,
    budget: float,
    allow_exceed: bool = False,
    **options: Any,
) -> tuple[PartitionResult, BudgetPoint]:
    """The decision alone (no graphs built): the partition and its figures."""
    store, nodes = _store(joint_module, num_fwd_outputs)
    opts = _rust.PartitionOptions(**cost_options(options))
    sol = _rust.partition_memory_budget(store, float(budget), opts, node_flops(nodes))
    point = _point(sol)
    if not point.met:
        if not allow_exceed:
            raise PartitionError(_unmet_message(point))
        warnings.warn(
            _unmet_message(point) + "; using it (allow_exceed=True)",
            BudgetExceededWarning,
            stacklevel=2,
        )
    return PartitionResult.from_raw(nodes, sol.partition), point


def memory_budget_partition(
    joint_module: fx.GraphModule,
    _joint_inputs: Any,
    *,
    num_fwd_outputs: int,
    budget: float,
    allow_exceed: bool = False,
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's ``partition_fn`` signature: save at most ``budget`` x (activation bytes
    min-cut saves) with the least estimated recompute cost. Raises ``PartitionError`` when
    the budget cannot be met (the message gives the smallest achievable figure)
    unless ``allow_exceed=True`` (then warns and uses that smallest partition)."""
    result, _ = memory_budget_joint(
        joint_module,
        num_fwd_outputs=num_fwd_outputs,
        budget=budget,
        allow_exceed=allow_exceed,
        **_torch_options(joint_module, kwargs),
    )
    return result.split(joint_module, num_fwd_outputs)


def frontier(
    joint_module: fx.GraphModule,
    *,
    num_fwd_outputs: int,
    budgets: Sequence[float] | None = None,
    **options: Any,
) -> list[BudgetPoint]:
    """The (activation bytes, recompute cost) answer for each budget, in one Rust pass
    (the flow network is built once and every evaluated multiplier is reused).

    Points are in the order of ``budgets`` (default :data:`DEFAULT_BUDGETS`); an
    unmeetable budget gives ``met=False`` and the smallest achievable point (no
    error here). Activation bytes never rise, and recompute cost never falls, as the
    budget falls: the points are the Pareto points the solver found."""
    store, nodes = _store(joint_module, num_fwd_outputs)
    bs = [float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)]
    opts = _rust.PartitionOptions(**cost_options(options))
    sols = _rust.memory_frontier(store, bs, opts, node_flops(nodes))
    return [_point(s) for s in sols]


def recompute_costs(
    joint_module: fx.GraphModule, *, num_fwd_outputs: int, **options: Any
) -> np.ndarray:
    """float64[N]: the cost table's price of recomputing each row of the node table
    (FLOPs from shapes, :func:`node_flops`; the cost model of ``options`` over the
    calibration file's, :func:`aotgrad.partition.calibration.cost_options`)."""
    store, nodes = _store(joint_module, num_fwd_outputs)
    opts = _rust.PartitionOptions(**cost_options(options))
    costs = _rust.recompute_costs(store, node_flops(nodes), opts)
    return np.frombuffer(costs, dtype=np.float64)
