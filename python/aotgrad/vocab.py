"""aotgrad's vocabulary: the codes Rust defines, as Python sees them, and the fx ``meta``
keys the Python stages share.

Every code that crosses the boundary (node kinds and flag bits, alias facts and
verdicts, placement bits, saved reasons, the node-table format version) is defined
once, in Rust (``rust/core/src/vocab.rs`` lists them), and exported by the extension
as ``aotgrad._rust.VOCABULARY``: ``{vocabulary: {NAME: code}}``. The classes below name
the members Python uses and take their values from that export. Importing this module
fails with an ``ImportError`` that names the code when the extension lacks a name
Python reads or exports one Python does not name: a stale build, or a code added on
one side only.

The ``meta`` keys at the end are Python's alone (Rust never sees an fx node).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from . import _rust


class Codes:
    """The codes of one vocabulary exported by ``aotgrad._rust``, read by attribute.

    Reading a name the extension does not export raises ``ImportError``; so does
    :meth:`check_all_read` when the extension exports a name that was never read.
    """

    def __init__(
        self, vocabulary: str, exported: Mapping[str, Mapping[str, int]] | None = None
    ) -> None:
        exported = _rust.VOCABULARY if exported is None else exported
        if vocabulary not in exported:
            raise ImportError(
                f"aotgrad._rust exports no vocabulary {vocabulary!r} (it has "
                f"{sorted(exported)}): the extension does not match this Python package; "
                "rebuild it (make build)"
            )
        self._vocabulary = vocabulary
        self._codes = dict(exported[vocabulary])
        self._read: set[str] = set()

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._codes:
            raise ImportError(
                f"aotgrad._rust's vocabulary {self._vocabulary!r} has no code {name!r} "
                f"(it has {sorted(self._codes)}): the extension does not match this Python "
                "package; rebuild it (make build)"
            )
        self._read.add(name)
        return self._codes[name]

    def check_all_read(self) -> None:
        """Raise ``ImportError`` naming the exported codes Python never read."""
        unread = sorted(set(self._codes) - self._read)
        if unread:
            raise ImportError(
                f"aotgrad._rust's vocabulary {self._vocabulary!r} has codes Python does not "
                f"know: {unread}; name them in aotgrad.vocab (or rebuild a stale extension)"
            )


# -- the node table (rust/core/src/store.rs, rust/core/src/table/mod.rs) --------------

FORMAT_VERSION: int = _rust.FORMAT_VERSION
#: Reserved op names of placeholder (PRIMAL, TANGENT) and GET_ATTR rows.
PLACEHOLDER_OP: str = _rust.PLACEHOLDER_OP
GET_ATTR_OP: str = _rust.GET_ATTR_OP

_K = Codes("node_kind")


class Kind(enum.IntEnum):
    """The ``kind`` column (``NodeKind``)."""

    PRIMAL = _K.PRIMAL
    TANGENT = _K.TANGENT
    CALL = _K.CALL
    GET_ATTR = _K.GET_ATTR


_K.check_all_read()
_F = Codes("node_flags")


class Flag(enum.IntFlag):
    """The ``flags`` column (``flags``); Rust refuses any other bit on input."""

    SYMBOLIC_SIZE = _F.SYMBOLIC_SIZE
    RANDOM = _F.RANDOM
    VIEW = _F.VIEW
    IMPURE = _F.IMPURE
    COMPUTE_INTENSIVE = _F.COMPUTE_INTENSIVE
    TANGENT_DERIVED = _F.TANGENT_DERIVED  # computed by Rust, ignored on input
    SYMINT = _F.SYMINT
    MUST_SAVE = _F.MUST_SAVE
    MUST_RECOMPUTE = _F.MUST_RECOMPUTE
    NON_TENSOR = _F.NON_TENSOR
    MULTI_OUTPUT = _F.MULTI_OUTPUT
    MUTATED_INPUT = _F.MUTATED_INPUT
    STATIC_INPUT = _F.STATIC_INPUT
    BACKWARD_REGION = _F.BACKWARD_REGION


_F.check_all_read()

# -- the alias table (rust/core/src/alias/facts.rs): plain ints, as the columns hold ----

_IN = Codes("input_facts")
IN_MUTATES_DATA: int = _IN.MUTATES_DATA
IN_MUTATES_METADATA: int = _IN.MUTATES_METADATA
IN_MUTATIONS_HIDDEN: int = _IN.MUTATIONS_HIDDEN
IN_REQUIRES_GRAD: int = _IN.REQUIRES_GRAD
IN_IS_LEAF: int = _IN.IS_LEAF
IN_NEW_VALUE_REQUIRES_GRAD: int = _IN.NEW_VALUE_REQUIRES_GRAD
IN_MUTATED_IN_BACKWARD: int = _IN.MUTATED_IN_BACKWARD
IN_KEEP_IN_GRAPH: int = _IN.KEEP_IN_GRAPH
IN_GRAD_MODE: int = _IN.GRAD_MODE
_IN.check_all_read()

_OUT = Codes("output_facts")
OUT_IS_TENSOR: int = _OUT.IS_TENSOR
OUT_REQUIRES_GRAD: int = _OUT.REQUIRES_GRAD
OUT_IS_INPUT: int = _OUT.IS_INPUT
OUT_ALIASES_INPUT: int = _OUT.ALIASES_INPUT
OUT_STORAGE_CHANGED: int = _OUT.STORAGE_CHANGED
OUT_VIEW_OF_INTERMEDIATE: int = _OUT.VIEW_OF_INTERMEDIATE
OUT_BASE_REQUIRES_GRAD: int = _OUT.BASE_REQUIRES_GRAD
OUT_BASE_IS_OUTPUT: int = _OUT.BASE_IS_OUTPUT
OUT_REINTERPRETED: int = _OUT.REINTERPRETED
_OUT.check_all_read()

# -- alias verdicts (rust/core/src/alias/rules.rs) -------------------------------------

_IV = Codes("input_verdict")


class InputVerdict(enum.IntEnum):
    """What the runtime does about one flat tensor input (``InputVerdict``)."""

    UNMUTATED = _IV.UNMUTATED
    DATA = _IV.DATA
    DATA_DIFFERENTIABLE = _IV.DATA_DIFFERENTIABLE
    DATA_IN_GRAPH = _IV.DATA_IN_GRAPH
    METADATA = _IV.METADATA
    DATA_AND_METADATA = _IV.DATA_AND_METADATA
    DATA_AND_METADATA_DIFFERENTIABLE = _IV.DATA_AND_METADATA_DIFFERENTIABLE
    ERROR_LEAF_MUTATED = _IV.ERROR_LEAF_MUTATED
    ERROR_ALIASED_MUTATION = _IV.ERROR_ALIASED_MUTATION
    ERROR_MUTATED_IN_BACKWARD = _IV.ERROR_MUTATED_IN_BACKWARD


_IV.check_all_read()
_OV = Codes("output_verdict")


class OutputVerdict(enum.IntEnum):
    """What one flat output is, for the runtime (``OutputVerdict``)."""

    NON_ALIAS = _OV.NON_ALIAS
    IS_INPUT = _OV.IS_INPUT
    ALIAS_OF_INPUT = _OV.ALIAS_OF_INPUT
    ALIAS_OF_INTERMEDIATE = _OV.ALIAS_OF_INTERMEDIATE
    ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT = _OV.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT
    ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT = _OV.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT


_OV.check_all_read()

#: Views of a value the compiled graph returns (an intermediate base's slot, or a user
#: output): the runtime makes the caller's view of it (``trace.fed_outputs``).
VIEWS_OF_BASES = (
    OutputVerdict.ALIAS_OF_INTERMEDIATE,
    OutputVerdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
    OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT,
)
#: The aliases the runtime can link onto (``runtime.fed_outputs_link``): those, and views
#: of inputs (made of the caller's).
LINKABLE = (*VIEWS_OF_BASES, OutputVerdict.ALIAS_OF_INPUT)

# -- the partition result (rust/core/src/partition/result.rs) --------------------------

_P = Codes("placement")
#: ``placement`` bits: computed in (or an input of) the forward; present in the backward.
IN_FORWARD: int = _P.FORWARD
IN_BACKWARD: int = _P.BACKWARD
_P.check_all_read()

_R = Codes("saved_reason")


class SavedReason(enum.IntEnum):
    """Why a value is saved for the backward (the ``saved_reason`` column)."""

    READ_BY_BACKWARD = _R.READ_BY_BACKWARD
    MIN_CUT_BOUNDARY = _R.MIN_CUT_BOUNDARY
    MUST_SAVE = _R.MUST_SAVE
    NEVER_RECOMPUTE = _R.NEVER_RECOMPUTE
    PRIMAL = _R.PRIMAL
    SYMBOLIC_SIZE = _R.SYMBOLIC_SIZE

    @property
    def label(self) -> str:
        """How reports and logs name the reason (``"min-cut boundary"``)."""
        return _rust.SAVED_REASON_LABELS[self.name]


_R.check_all_read()
if sorted(SavedReason) != list(range(len(SavedReason))):
    raise ImportError(f"aotgrad._rust's saved reasons are not codes 0..n-1: {list(SavedReason)}")
#: The label of each saved-reason code, indexed by code.
SAVED_REASONS: tuple[str, ...] = tuple(r.label for r in sorted(SavedReason))

# -- fx node meta keys (Python's alone) ---------------------------------------------------

#: The tracer's role of a joint graph's placeholder: ``PRIMAL_ROLE`` or ``TANGENT_ROLE``.
ROLE_KEY = "aotgrad_role"
PRIMAL_ROLE = "primal"
TANGENT_ROLE = "tangent"
#: Set (True) on primals the function overwrites in place.
MUTATED_KEY = "aotgrad_mutated"
#: Set (True) on primals alive for the whole step (parameters, buffers): free to save.
STATIC_KEY = "aotgrad_static_input"
#: Set (True) on primals eager's backward does not read (autograd saved none of them, nor
#: a view or ``detach()`` of one): min-cut saves one only where nothing else can be
#: saved, so that a write to it between the call and the backward (an optimizer step, a
#: ``.data`` write) reaches the gradient only where it reaches eager's.
UNREAD_KEY = "aotgrad_unread_by_eager"
#: Set (True) on the new value of an input the function writes, where eager's backward
#: reads the input itself: the runtime saves it as a view of the caller's tensor
#: (``runtime.saved_tensors.aliases_of_written_inputs``), so saving it is free, and
#: min-cut computes what eager's backward computes from the input in the backward, from
#: it (a later ``.data`` write to the input reaches both).
SAVED_AS_INPUT_KEY = "aotgrad_saved_as_input"
#: Set (True) on forward values eager's backward reads that are computed from an
#: output's storage eager saves nothing of (``trace.output_saves``): the partitioner
#: saves them (``MUST_SAVE``), so that the backward needs nothing the caller can write.
EAGER_SAVE_KEY = "aotgrad_eager_save"
#: torch's keys that aotgrad reads: a checkpoint tag (``CheckpointPolicy``), its region
#: id, and which pass traced the node (``TRACED_BY_FORWARD``: the forward).
RECOMPUTE_KEY = "recompute"
AC_GRAPH_ID_KEY = "ac_graph_id"
PARTITIONER_TAG = "partitioner_tag"
TRACED_BY_FORWARD = "is_forward"
