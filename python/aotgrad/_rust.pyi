"""Type stubs of ``aotgrad._rust``, the pyo3 extension (``rust/binding``).

Private: import the public names from ``aotgrad.errors`` / ``aotgrad.table`` /
``aotgrad.vocab``. Checked against the built module by ``mypy.stubtest`` (``make lint``).
"""

from typing import Any, Protocol, final

from typing_extensions import Buffer

# pyo3 lists every name the module adds (stubtest checks this list against it).
__all__ = [
    "FORMAT_VERSION",
    "GET_ATTR_OP",
    "PLACEHOLDER_OP",
    "SAVED_REASON_LABELS",
    "VOCABULARY",
    "AotgradError",
    "BudgetSolution",
    "FlowError",
    "GraphError",
    "GraphStore",
    "InternalError",
    "Partition",
    "PartitionError",
    "PartitionOptions",
    "TableError",
    "__version__",
    "_panic_for_tests",
    "check_partition",
    "classify_aliases",
    "memory_frontier",
    "min_cut",
    "partition_default",
    "partition_memory_budget",
    "partition_min_cut",
    "recompute_costs",
]

# -- the vocabulary (rust/binding/src/vocab.rs) -----------------------------

__version__: str  # the Rust workspace's version, the package's only one
FORMAT_VERSION: int  # of the node table (docs/node_table.md)
PLACEHOLDER_OP: str  # reserved op name of PRIMAL and TANGENT rows
GET_ATTR_OP: str  # reserved op name of GET_ATTR rows
#: Every code that crosses the boundary: ``{vocabulary: {NAME: code}}`` (node_kind,
#: node_flags, input_facts, output_facts, input_verdict, output_verdict, placement,
#: saved_reason); ``aotgrad.vocab`` builds Python's enums from it.
VOCABULARY: dict[str, dict[str, int]]
#: ``{NAME: label}`` of the saved_reason vocabulary (``"min-cut boundary"``).
SAVED_REASON_LABELS: dict[str, str]

# -- errors (rust/binding/src/errors.rs) ------------------------------------

class AotgradError(Exception):
    """Base class of every error aotgrad raises."""

class TableError(AotgradError):
    """A node table that breaks the format contract (docs/node_table.md)."""

    column: str
    node: int | None

class GraphError(AotgradError):
    """A graph that is not a valid joint graph."""

    node: int | None

class FlowError(AotgradError):
    """Bad input to a max-flow / min-cut primitive."""

class PartitionError(AotgradError):
    """A partition that cannot satisfy its constraints."""

class InternalError(AotgradError):
    """A bug in aotgrad: Rust code panicked."""

def _panic_for_tests() -> None:
    """Panics in Rust; raises ``InternalError`` (for tests of the boundary)."""

# -- the graph store (rust/binding/src/store.rs) ----------------------------

class _Table(Protocol):
    """What ``GraphStore.from_table`` reads: ``aotgrad.table.NodeTable``'s attributes."""

    version: int
    kind: Buffer  # uint8[N]
    op: Buffer  # uint32[N]
    arg_ptr: Buffer  # uint32[N + 1]
    arg_idx: Buffer  # uint32[E]
    nbytes: Buffer  # uint64[N]
    const_hash: Buffer  # uint64[N]
    flags: Buffer  # uint32[N]
    region: Buffer  # int32[N]
    outputs: Buffer  # int32[M]
    num_fwd_outputs: int
    op_names: list[str]

@final
class GraphStore:
    """A validated joint forward+backward graph held by Rust."""

    @staticmethod
    def from_table(table: _Table) -> GraphStore:
        """Validate a node table (read zero-copy) and build the store; raises ``TableError``."""
    def __len__(self) -> int: ...
    @property
    def num_fwd_outputs(self) -> int: ...
    def verify(self) -> None:
        """Re-check every store invariant; raises ``GraphError``."""
    def render(self, node: int, radius: int = 3) -> str:
        """The nodes within ``radius`` of ``node``, ``node`` marked with ``==>``."""
    def render_graph(self) -> str:
        """The whole graph, one node per line, then the outputs."""
    def args(self, node: int) -> list[int]: ...
    def users(self, node: int) -> list[int]: ...
    def tangent_derived(self) -> bytes:
        """N bytes: 1 where a node is a tangent or reads a tangent-derived node."""
    def to_columns(self) -> dict[str, Any]:
        """Columns as native-endian ``bytes`` plus version, num_fwd_outputs, op_names."""

# -- max-flow min-cut (rust/binding/src/flow.rs) ----------------------------

def min_cut(
    num_nodes: int, src: Buffer, dst: Buffer, capacity: Buffer, source: int, sink: int
) -> tuple[float, bytes]:
    """Minimum s-t cut over int64 ``src``/``dst`` and float64 ``capacity`` buffers
    (read zero-copy; ``inf`` = uncuttable). Returns the cut's capacity and ``num_nodes``
    bytes, 1 on the source side. Raises ``FlowError`` on bad input or an unbounded flow."""

# -- partitioners (rust/binding/src/partition.rs) ----------------------------

@final
class Partition:
    """A partition of a joint graph (docs/node_table.md, "The partition result")."""

    @property
    def placement(self) -> bytes:
        """uint8[N]: bit 0 in the forward graph, bit 1 in the backward graph."""
    @property
    def saved(self) -> bytes:
        """uint32[S]: saved node ids, tensors first, then SymInts."""
    @property
    def saved_reason(self) -> bytes:
        """uint8[S]: why each value is saved."""
    @property
    def recomputed(self) -> bytes:
        """uint32[R]: CALL nodes computed in both graphs."""
    @property
    def saved_bytes(self) -> int: ...
    @property
    def num_saved_symints(self) -> int: ...
    @property
    def rep(self) -> bytes:
        """uint32[N]: each node's representative after CSE (itself unless merged into an
        earlier node computing the same value; a merged node has placement 0)."""

@final
class PartitionOptions:
    """The partitioners' options (rust/binding/src/options.rs), torch's defaults unless
    given by keyword; ``PartitionError`` names an unknown field, a value of the wrong
    type, or an invalid cost model."""

    ban_if_not_in_allowlist: bool
    ban_if_reduction: bool
    ban_if_materialized_backward: bool
    ban_if_used_far_apart: bool
    ban_if_long_fusible_chains: bool
    long_chain: int
    max_dist_from_bw: int
    recompute_views: bool
    cse: bool
    flops_per_byte: float
    fused_factor: float
    op_factors: dict[str, float]  # a copy: assign a new dict to change it
    def __new__(
        cls,
        *,
        ban_if_not_in_allowlist: bool = ...,
        ban_if_reduction: bool = ...,
        ban_if_materialized_backward: bool = ...,
        ban_if_used_far_apart: bool = ...,
        ban_if_long_fusible_chains: bool = ...,
        long_chain: int = ...,
        max_dist_from_bw: int = ...,
        recompute_views: bool = ...,
        cse: bool = ...,
        flops_per_byte: float = ...,
        fused_factor: float = ...,
        op_factors: dict[str, float] = ...,
    ) -> PartitionOptions: ...

def partition_default(store: GraphStore, options: PartitionOptions | None = None) -> Partition:
    """Save every forward value the backward reads. Of ``options`` only ``cse`` (merge
    common subexpressions first, default True) applies."""

def partition_min_cut(store: GraphStore, options: PartitionOptions | None = None) -> Partition:
    """Min-cut rematerialization with ``options`` (torch's defaults if ``None``); raises
    ``PartitionError`` on an unsatisfiable graph, ``GraphError`` on a tangent-derived
    forward output."""

def check_partition(store: GraphStore, partition: Partition) -> None:
    """Raise ``PartitionError`` if ``partition`` is not a valid partition of ``store``
    (its ``rep`` merging only nodes that compute the same value)."""

# -- memory-budget partitioner (rust/binding/src/budget.rs) -------------------

@final
class BudgetSolution:
    """The memory-budget partition for one budget (a fraction of min-cut's saved bytes)."""

    @property
    def partition(self) -> Partition: ...
    @property
    def budget(self) -> float: ...
    @property
    def saved_bytes(self) -> int: ...
    @property
    def activation_bytes(self) -> int:
        """The storage the saved tensors hold, each storage once (a view holds its
        base), less primal inputs' storage: what the budget limits."""
    @property
    def recompute_cost(self) -> float:
        """Sum of the recompute-cost table over the recomputed nodes."""
    @property
    def min_cut_bytes(self) -> int:
        """Activation bytes the min-cut partition saves (the reference of ``budget``)."""
    @property
    def min_bytes(self) -> int:
        """The smallest activation bytes any valid partition achieves."""
    @property
    def target_bytes(self) -> int:
        """``floor(budget * min_cut_bytes)``."""
    @property
    def met(self) -> bool: ...
    @property
    def exact(self) -> bool:
        """Every subset of recompute candidates was evaluated (small graphs)."""

def partition_memory_budget(
    store: GraphStore,
    budget: float,
    options: PartitionOptions | None = None,
    flops: Any | None = None,
) -> BudgetSolution:
    """Save at most ``budget`` x min-cut's activation bytes with the least recompute
    cost (compute-intensive ops may be recomputed, priced by ``flops``: a float64[N]
    buffer of per-node FLOPs, estimated from byte sizes when ``None``); an
    unmeetable budget gives ``met=False`` (never an error); ``PartitionError`` on a
    budget that is not a finite number >= 0 or a bad ``flops``."""

def memory_frontier(
    store: GraphStore,
    budgets: list[float],
    options: PartitionOptions | None = None,
    flops: Any | None = None,
) -> list[BudgetSolution]:
    """``partition_memory_budget`` for every budget in one pass."""

def recompute_costs(
    store: GraphStore, flops: Any | None = None, options: PartitionOptions | None = None
) -> bytes:
    """float64[N] (native order): the cost table's price of recomputing each node
    (``options``: the cost model's ``flops_per_byte``, ``fused_factor``, ``op_factors``)."""

# -- alias classification (rust/binding/src/alias.rs) -----------------------

def classify_aliases(
    input_flags: list[int],
    input_storage: list[int],
    output_flags: list[int],
    output_input: list[int],
    output_base: list[int],
    output_base_output: list[int],
) -> tuple[bytes, bytes, list[int], list[int]]:
    """The alias table (docs/node_table.md) → ``(input_verdicts, output_verdicts,
    output_source, intermediate_bases)``; ``TableError`` (``column``, ``node`` = row) on a
    malformed table."""
