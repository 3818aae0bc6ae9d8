"""Small models shipped with aotgrad for the demo, the benchmarks and the tests."""

from .gpt import GPT, GPTConfig, transformer_stack

__all__ = ["GPT", "GPTConfig", "transformer_stack"]
