"""tritune: makes Triton GPU kernels faster automatically, and proves every change correct."""

__version__ = "0.1.0"
