"""aotgrad: an independent AOT Autograd for PyTorch."""
