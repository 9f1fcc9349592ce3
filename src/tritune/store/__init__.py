"""The decision store: verified decisions and all the evidence behind them, in one SQLite file.

``keys`` says what a decision is keyed by (kernel source, specialization and shape bucket, GPU,
Triton version) and computes keys from a captured spec or from live arguments; ``schema`` holds
the tables and their version; ``connection`` the multi-process SQLite setup; ``db``,
``decisions``, ``priors`` and ``remote`` the ``DecisionStore`` (runs, candidates, decisions, profiles,
export, the decisions that seed a new search, a key's records carried to and from a Ray lane).
"""

from tritune.store.db import INTERRUPTED, MAX_ATTEMPTS, DecisionStore
from tritune.store.decisions import UnverifiedDecision
from tritune.store.keys import LiveKeyer, current_target, key_for, size_bucket, specialization_of, triton_int_class
from tritune.store.priors import size_class
from tritune.store.records import Candidate, Decision, Run, variant_hash
from tritune.store.schema import SCHEMA_VERSION, StoreError

__all__ = ["Candidate", "Decision", "DecisionStore", "INTERRUPTED", "LiveKeyer", "MAX_ATTEMPTS",
           "Run", "SCHEMA_VERSION", "StoreError", "UnverifiedDecision", "current_target", "key_for", "size_bucket",
           "size_class", "specialization_of", "triton_int_class", "variant_hash"]
