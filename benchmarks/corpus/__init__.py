"""Issue 24 section 4: Liger-Kernel and flash-linear-attention as a development corpus (README.md)."""
