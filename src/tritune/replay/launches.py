"""Count a kernel's real launches, so that verification can tell a kernel from a ghost.

Ghost replay (KernelGenBench): a candidate's outputs can be right without its kernel running,
e.g. a source that replaces the ``JITFunction``'s ``run`` with Python that computes the result
with torch, or hands back a cached one. Verification counts the candidate kernel's launches while
the candidate runs (``Launches.counting``) and rejects it when a run launched nothing.

How a launch is seen, by where kernels run:

- on a GPU, through Triton's documented hook: ``triton.knobs.runtime.launch_enter_hook`` (a
  ``HookChain``; added for the block and removed after, so other hooks stay chained). Triton's
  launcher calls it with the compiled kernel's metadata, whose ``name`` is the ``@triton.jit``
  function's name; a Python ``run`` never reaches the launcher, whatever it returns.
- under ``TRITON_INTERPRET=1`` no launcher exists: every interpreted launch runs
  ``triton.runtime.interpreter.GridExecutor.__call__``, which this module wraps for the block
  (put back after), counting the executors whose ``fn`` has the kernel's name. This is the one
  patch of Triton's internals here; ``tests/replay_verify/test_ghost_replay.py`` fails if Triton renames it.

Streams: the hook's metadata names the stream of each launch. On a GPU a counted launch on
another stream than the one current when counting began (the replay's, which the timer measures)
is counted in ``off_stream`` too, and verification rejects it: a kernel a candidate's host code
moved to a side stream would run outside the timed region, and nothing it computed could be
trusted to have finished when the timer stopped. The interpreter has no streams.

Counted by name, while the candidate runs only: the baseline's kernel has the same name, and
its runs are outside the block. A candidate that launches its real kernel on scratch memory and
takes its outputs from elsewhere still launches: what the count proves is that the kernel ran,
not that its outputs came from it.

``skipping()`` is for that: inside it every Triton launch returns at once without running, so
outputs that are still right came from elsewhere (torch beside the kernel, a result kept from an
earlier call). Under the interpreter it wraps the same ``GridExecutor.__call__``; on a GPU, where
the launch hook cannot stop a launch, ``JITFunction.run`` (what ``kernel[grid](...)``,
``triton.autotune`` and ``triton.heuristics`` call; a warm-up, which compiles only, still runs).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator


class Launches:
    """Launches of the kernel named ``name`` seen inside ``counting()`` blocks (``count``); on a
    GPU, those of them on another stream than ``stream`` (``off_stream``; default: the current
    stream when the block is entered, which the replay launches on and the timer measures)."""

    def __init__(self, name: str, *, interpreted: bool, stream: int | None = None) -> None:
        self.name, self.interpreted, self.stream = name, interpreted, stream
        self.count = 0
        self.off_stream = 0

    def matches(self, name: str | None) -> bool:
        """Whether a launch of the kernel named ``name`` counts (a subclass widens it)."""
        return name == self.name

    @contextlib.contextmanager
    def counting(self) -> Iterator["Launches"]:
        install = _interpreter_launches if self.interpreted else _gpu_launches
        with install(self):
            yield self

    def seen(self, name: str | None, stream: Any = None, expected: Any = None) -> None:
        if self.matches(name):
            self.count += 1
            if expected is not None and stream is not None and stream != expected:
                self.off_stream += 1


@contextlib.contextmanager
def _gpu_launches(launches: Launches) -> Iterator[None]:
    from triton import knobs

    expected = launches.stream if launches.stream is not None else _current_stream()

    def on_launch(metadata: Any) -> None:
        data = getattr(metadata, "data", None)  # the LazyDict's eager part: no launch_metadata call
        data = data if isinstance(data, dict) else metadata.get()
        launches.seen(data.get("name"), data.get("stream"), expected)

    chain = knobs.runtime.launch_enter_hook
    chain.add(on_launch)
    try:
        yield
    finally:
        chain.remove(on_launch)


def _current_stream() -> int | None:
    """The raw handle of the current CUDA stream (what Triton's launcher passes its hook), None
    without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.current_stream().cuda_stream


@contextlib.contextmanager
def _interpreter_launches(launches: Launches) -> Iterator[None]:
    from triton.runtime.interpreter import GridExecutor

    original = GridExecutor.__call__

    @functools.wraps(original)
    def call(executor: Any, *args: Any, **kwargs: Any) -> Any:
        launches.seen(getattr(executor.fn, "__name__", None))
        return original(executor, *args, **kwargs)

    GridExecutor.__call__ = call
    try:
        yield
    finally:
        GridExecutor.__call__ = original


@contextlib.contextmanager
def skipping(*, interpreted: bool) -> Iterator[list]:
    """Every Triton launch inside returns None at once, its kernel not run; yields the list of the
    names of the kernels skipped (module doc)."""
    if interpreted:
        from triton.runtime.interpreter import GridExecutor as owner
    else:
        from triton.runtime.jit import JITFunction as owner
    skipped: list = []
    original = owner.__call__ if interpreted else owner.run

    if interpreted:
        @functools.wraps(original)
        def replacement(executor: Any, *args: Any, **kwargs: Any) -> Any:
            skipped.append(getattr(executor.fn, "__name__", None))
    else:
        @functools.wraps(original)
        def replacement(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if warmup:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            skipped.append(getattr(fn, "__name__", None))

    name = "__call__" if interpreted else "run"
    setattr(owner, name, replacement)
    try:
        yield skipped
    finally:
        setattr(owner, name, original)
