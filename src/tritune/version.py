"""tritune's version, on the bottom floor: the store records it, and importing it loads nothing."""

__version__ = "0.1.0"
