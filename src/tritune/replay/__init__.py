"""Replay: rebuild a captured launch with fresh inputs and run it, as captured or as a variant."""

from tritune.replay.inputs import device_of, interpreting, make_args, outputs
from tritune.replay.kernel import KernelLoadError, load_kernel
from tritune.replay.launch import Replay

__all__ = ["KernelLoadError", "Replay", "device_of", "interpreting", "load_kernel",
           "make_args", "outputs"]
