"""Imported at a worker's start by tests/worker/test_worker_close.py: a library whose import is slow."""

import time

time.sleep(60)
