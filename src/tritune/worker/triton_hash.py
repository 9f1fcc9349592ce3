"""Preloaded first by a lane's workers (``loop.lanes``), before torch: Triton's hash of itself, in a thread.

Triton hashes its own files once per process, at its first compile or cache lookup
(``triton.runtime.cache.triton_key``): ~0.4 s on an H200 host, most of it reading and hashing
``libtriton`` (~400 MB in 1 MB chunks, which release the GIL). Taken in the worker's main
thread (``device_ready``, after torch), it lengthened every lane worker's start, the timing
worker's among them, which a short run waits for. Here a thread takes it while the main thread
imports torch; ``device_ready`` waits for it, so a worker is ready with the hash taken, as
before. Under the interpreter nothing compiles and no thread starts.
"""

from __future__ import annotations

import threading

from tritune import config


def _hash() -> None:
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # another Triton: its first compile pays it
        return
    triton_key()


THREAD: threading.Thread | None = None
if not config.interpreting():
    THREAD = threading.Thread(target=_hash, name="tritune-triton-hash", daemon=True)
    THREAD.start()


def wait() -> None:
    """Until the hash is taken (at once when no thread started)."""
    if THREAD is not None:
        THREAD.join()
