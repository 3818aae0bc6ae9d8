"""Type stubs of ``aotgrad._rust``, the pyo3 extension (``rust/binding``).

Private: import the public names from ``aotgrad.errors`` / ``aotgrad.table``.
"""

from typing import Any, Protocol

from typing_extensions import Buffer

FORMAT_VERSION: int

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
    flags: Buffer  # uint32[N]
    region: Buffer  # int32[N]
    outputs: Buffer  # int32[M]
    num_fwd_outputs: int
    op_names: list[str]

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
