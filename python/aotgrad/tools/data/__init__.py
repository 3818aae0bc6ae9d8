"""Data shipped with aotgrad (the demo corpus)."""
