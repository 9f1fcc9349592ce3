"""Benchmark captured launches: ``tritune bench DIR``.

- ``timing``    the timing methods (do_bench median, CUDA-event mean/p50/p95, seed 000's paired
                ratio, CUDA-graph replay, noise, copy bandwidth) and their statistics.
- ``roofline``  bytes a launch moves (Inductor's count, or an estimate from its tensors),
                achieved GB/s and the fraction of the copy bandwidth.
- ``run``       one spec (or variant) through replay: ``bench_spec``; ``bench_job`` for workers.
- ``render``    a rich table, or JSON.

Importing this package loads neither torch nor Triton (``benchmarks/_common.py`` relies on it).
"""

from tritune.bench.roofline import Traffic, achieved_gbps, roofline_fraction, traffic
from tritune.bench.run import METHODS, RESULT_KEYS, bench_job, bench_spec
from tritune.bench.timing import (copy_bandwidth_gbps, do_bench_median, event_stats, graph_time, noise,
                                  paired_ratio, rotation_count, summarize)

__all__ = ["METHODS", "RESULT_KEYS", "Traffic", "achieved_gbps", "bench_job", "bench_spec",
           "copy_bandwidth_gbps", "do_bench_median", "event_stats", "graph_time", "noise", "paired_ratio",
           "roofline_fraction", "rotation_count", "summarize", "traffic"]
