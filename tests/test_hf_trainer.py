"""The Hugging Face ``Trainer`` recipe of the README: ``model.compile(backend="aotgrad")``
before the ``Trainer`` is built trains with the losses of ``backend="inductor"``.

Optional: ``make trainer-check`` installs ``transformers`` and ``accelerate`` into the venv
and runs this file (``AOTGRAD_TRAINER_CHECK=1``); ``make test`` skips it.
"""

from __future__ import annotations

import os

import pytest
import torch

if os.environ.get("AOTGRAD_TRAINER_CHECK") != "1":
    pytest.skip("make trainer-check runs this (AOTGRAD_TRAINER_CHECK=1)", allow_module_level=True)
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

STEPS = 4


class Tokens(torch.utils.data.Dataset):
    """Random token sequences; the labels are the inputs (causal LM)."""

    def __init__(self, n: int = 32, seq: int = 16, vocab: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(vocab, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def tiny_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=64,
        n_positions=16,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def train(tmp_path, backend: str | None) -> list[float]:
    """The README's recipe: compile the model in place, then hand it to the Trainer."""
    model = tiny_gpt2()
    if backend is not None:
        model.compile(backend=backend)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / (backend or "eager")),
        max_steps=STEPS,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_trainer_with_model_compile_aotgrad_matches_inductor(tmp_path):
    aotgrad = train(tmp_path, "aotgrad")
    inductor = train(tmp_path, "inductor")
    assert len(aotgrad) == len(inductor) == STEPS
    torch.testing.assert_close(aotgrad, inductor, rtol=1e-4, atol=1e-4)
    # and both learn: the loss falls over the steps
    assert aotgrad[-1] < aotgrad[0]


def test_trainer_torch_compile_backend_name_is_refused_by_accelerate(tmp_path):
    # What the README warns about: accelerate validates the backend name against its own
    # list, so the Trainer's torch_compile_backend cannot name aotgrad.
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        torch_compile=True,
        torch_compile_backend="aotgrad",
        use_cpu=True,
        report_to=[],
    )
    with pytest.raises(ValueError, match="not a valid DynamoBackend"):
        transformers.Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens())
