"""tritune: makes Triton GPU kernels faster automatically, and proves every change correct."""

from tritune.version import __version__

__all__ = ["__version__", "disable", "enable"]

_LAZY = {"enable", "disable"}  # tritune.enable(store) / tritune.disable(): see tritune.apply


def __getattr__(name: str):
    if name in _LAZY:  # loaded on first use: ``import tritune`` imports neither torch nor Triton
        from tritune import apply

        return getattr(apply, name)
    raise AttributeError(f"module 'tritune' has no attribute {name!r}")
