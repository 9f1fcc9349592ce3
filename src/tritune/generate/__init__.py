"""`tritune generate`: fused Triton kernels from a PyTorch spec (issue 14)."""
