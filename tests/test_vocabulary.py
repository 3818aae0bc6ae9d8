"""One vocabulary across the boundary: every code Rust exports (``aotgrad._rust.VOCABULARY``,
the format version, the reserved op names, the version) is what Python's enums and
constants hold, the modules that use them share those very objects, and an extension
that lacks a name Python reads (or exports one Python does not name) fails the import."""

from __future__ import annotations

import importlib.util
import io
import tokenize
from pathlib import Path

import pytest

import aotgrad
from aotgrad import _rust, alias, split, table, vocab
from aotgrad.alias import facts
from aotgrad.partition import api as partition_api


def _python_view(vocabulary: str, names: list[str]) -> dict[str, int]:
    """Python's codes of ``vocabulary``, by name (the facts' and placement's by the names
    Rust exports, under the prefix Python gives them)."""
    enums: dict[str, type] = {
        "node_kind": vocab.Kind,
        "node_flags": vocab.Flag,
        "input_verdict": vocab.InputVerdict,
        "output_verdict": vocab.OutputVerdict,
        "saved_reason": vocab.SavedReason,
    }
    if vocabulary in enums:
        return {m.name: int(m) for m in enums[vocabulary]}
    prefix = {"input_facts": "IN_", "output_facts": "OUT_", "placement": "IN_"}[vocabulary]
    return {name: getattr(vocab, prefix + name) for name in names}


@pytest.mark.parametrize("vocabulary", sorted(_rust.VOCABULARY))
def test_every_exported_code_matches_python(vocabulary: str) -> None:
    exported = _rust.VOCABULARY[vocabulary]
    assert exported, vocabulary
    assert _python_view(vocabulary, list(exported)) == exported


def test_every_python_view_has_an_exported_vocabulary() -> None:
    assert set(_rust.VOCABULARY) == {
        "node_kind",
        "node_flags",
        "input_facts",
        "output_facts",
        "input_verdict",
        "output_verdict",
        "placement",
        "saved_reason",
    }


def test_scalars_and_labels_match() -> None:
    assert vocab.FORMAT_VERSION == table.FORMAT_VERSION == _rust.FORMAT_VERSION
    assert table.NodeTable.__dataclass_fields__["version"].default == _rust.FORMAT_VERSION
    assert (vocab.PLACEHOLDER_OP, vocab.GET_ATTR_OP) == (_rust.PLACEHOLDER_OP, _rust.GET_ATTR_OP)
    assert aotgrad.__version__ == _rust.__version__
    assert set(_rust.SAVED_REASON_LABELS) == set(_rust.VOCABULARY["saved_reason"])
    assert partition_api.SAVED_REASONS is vocab.SAVED_REASONS
    for reason in vocab.SavedReason:
        assert vocab.SAVED_REASONS[reason] == _rust.SAVED_REASON_LABELS[reason.name]


def test_the_stages_share_the_vocabulary_objects() -> None:
    assert table.Flag is vocab.Flag and table.Kind is vocab.Kind
    assert alias.InputVerdict is vocab.InputVerdict
    assert alias.OutputVerdict is vocab.OutputVerdict
    assert (split.IN_FORWARD, split.IN_BACKWARD) == (vocab.IN_FORWARD, vocab.IN_BACKWARD)
    for name in _rust.VOCABULARY["input_facts"]:
        if hasattr(facts, "IN_" + name):
            assert getattr(facts, "IN_" + name) == getattr(vocab, "IN_" + name)


def test_a_missing_or_unknown_code_is_an_import_error() -> None:
    exported = {"node_flags": {"RANDOM": 2, "VIEW": 4}}
    with pytest.raises(ImportError, match="vocabulary 'node_kind'"):
        vocab.Codes("node_kind", exported)
    codes = vocab.Codes("node_flags", exported)
    assert codes.RANDOM == 2
    with pytest.raises(ImportError, match="'node_flags' has no code 'IMPURE'"):
        _ = codes.IMPURE
    with pytest.raises(ImportError, match=r"Python does not know: \['VIEW'\]"):
        codes.check_all_read()
    assert codes.VIEW == 4
    codes.check_all_read()


def _import_vocab_with(monkeypatch: pytest.MonkeyPatch, exported: dict) -> None:
    """Executes ``aotgrad/vocab.py`` afresh (a module of its own, so the imported one
    and the classes the stages hold stay as they are) against ``exported``."""
    monkeypatch.setattr(_rust, "VOCABULARY", exported)
    spec = importlib.util.spec_from_file_location("aotgrad._vocab_probe", vocab.__file__)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_importing_against_a_mismatched_extension_fails_loudly(monkeypatch) -> None:
    exported = {k: dict(v) for k, v in _rust.VOCABULARY.items()}
    _import_vocab_with(monkeypatch, exported)  # the real export imports

    del exported["node_flags"]["BACKWARD_REGION"]
    with pytest.raises(ImportError, match="'node_flags' has no code 'BACKWARD_REGION'"):
        _import_vocab_with(monkeypatch, exported)

    exported["node_flags"]["BACKWARD_REGION"] = 1 << 13
    exported["output_verdict"]["NEW_VERDICT"] = 9
    with pytest.raises(ImportError, match=r"Python does not know: \['NEW_VERDICT'\]"):
        _import_vocab_with(monkeypatch, exported)

    del exported["output_verdict"]["NEW_VERDICT"]
    del exported["placement"]
    with pytest.raises(ImportError, match="no vocabulary 'placement'"):
        _import_vocab_with(monkeypatch, exported)


_META_KEYS = {"aotgrad_role", "aotgrad_mutated", "aotgrad_static_input"}


def test_meta_keys_are_spelled_once() -> None:
    """The fx ``meta`` keys aotgrad sets are string literals only in ``vocab.py``."""
    package = Path(aotgrad.__file__).parent
    spelled: list[str] = []
    for path in sorted(package.rglob("*.py")):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        for tok in tokens:
            if tok.type == tokenize.STRING and tok.string.strip("\"'") in _META_KEYS:
                spelled.append(f"{path.relative_to(package)}:{tok.start[0]}")
    assert all(s.startswith("vocab.py:") for s in spelled), spelled
    assert len(spelled) == len(_META_KEYS)
