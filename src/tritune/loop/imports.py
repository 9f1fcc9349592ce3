"""``tritune store import``: decisions made elsewhere, verified and timed again here, then signed.

A foreign store is untrusted (``tritune.store.signing``): none of its decisions is applied and
none of its candidates is reused until this tritune has judged it. Import takes each verified,
enabled decision of the other store whose key is for this GPU and Triton version, finds the
launch it is for in the user's own capture (``--launches DIR``: the key names the kernel source,
its specialization and shape bucket, so a launch of the same key is the same problem), and runs
it through the loop's gates, in the loop's isolated worker:

    baseline   the captured launch timed (the noise from two timings)
    candidate  the foreign variant built, verified on fresh input sets (guard regions, poisoned
               outputs; the mode its kind of change needs, as in ``loop.families``) and timed
    arbiter    >= the threshold and beyond the noise, confirmed by interleaved re-timing

A decision that passes becomes a candidate and a decision of the target store, signed there; one
that fails is recorded there as a rejected candidate with the reason. Building a foreign variant
that carries source runs that source, in the worker, only once it passes the allowlist
(``allowlist.sandbox.check_variant_source`` against the user's own capture; every foreign source, whatever
rule it names): refused, it is rejected as ``unsafe`` before it runs; and jailed (``worker.jail``:
no key, no home, no network; ``tritune store import`` refuses it where the jail is missing, unless
``--unsafe-no-jail``). An options-only variant runs no code of the other store's.

A foreign variant that changes the kernel's code (source, passes) is imported as assuming
no-alias (``aliasing``): verification gives every argument a buffer of its own, so it cannot tell
a variant that is correct only on disjoint arguments (made under the assumption, its record of
that dropped or never written) from one that is correct always; tritune's own rules prove which
is which, the other store's word cannot. The applier then uses it only where each launch's
tensors are disjoint and runs the program's own kernel elsewhere (``noalias_fallbacks``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tritune.arbiter import NOT_FINAL as ARBITER_NOT_FINAL, beats_held
from tritune.loop.evaluate import Evaluator
from tritune.model.failures import UNSAFE
from tritune.model.launch import LaunchSpec
from tritune.model.settings import ArbiterSettings
from tritune.model.target import Target
from tritune.model.variant import NOALIAS, Variant
from tritune.rewrites.base import EXACT
from tritune.store import DecisionStore, key_for
from tritune.store.records import Decision, describe_variant, variant_hash

IMPORTED, REJECTED, SKIPPED = "imported", "rejected", "skipped"
NOT_FINAL = (*ARBITER_NOT_FINAL, "not_better")  # left verified: a later import may judge them again


@dataclasses.dataclass(frozen=True)
class ImportResult:
    kernel: str
    key_sha: str
    variant: str  # what the variant changes
    status: str  # IMPORTED, REJECTED or SKIPPED
    reason: str
    speedup: float | None = None  # confirmed here

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def verification_mode(variant: Variant) -> str:
    """The gate a foreign variant must pass, by what it changes (``loop.families``' rule): passes
    alone are exact (bitwise) unless fast-math; anything that may reorder arithmetic (options,
    constexprs, new source) is checked against the tolerance table, except an exact rule's rewrite
    alone: bitwise, as the source-rewrite family checks it. The other store's word for a rewrite's
    class only ever makes the gate stricter here."""
    if isinstance(variant.rewrite, dict) and variant.rewrite.get("exact") == EXACT \
            and not (variant.options or variant.constexprs or variant.passes):
        return "bitwise"
    if variant.passes and not (variant.options or variant.constexprs or variant.source):
        return "fast_math" if variant.fast_math else "bitwise"
    return "tolerance"


def import_decisions(other: DecisionStore, mine: DecisionStore, specs: list[LaunchSpec], evaluator: Evaluator,
                     target: Target, *, settings: ArbiterSettings = ArbiterSettings(), fast_math: bool = False,
                     command: str = "", log: Callable[[str], None] | None = None) -> list[ImportResult]:
    """Judge every usable-looking decision of ``other`` here and sign those that pass into ``mine``."""
    log = log or (lambda line: None)
    by_sha = {}
    for spec in specs:
        key = key_for(spec, target)
        by_sha.setdefault(key.sha, spec)
    results, run_id = [], None
    for decision in other.decisions():
        skip = _skip_reason(decision, mine, by_sha, target, fast_math)
        if skip is not None:
            results.append(_result(decision, SKIPPED, skip))
            continue
        if run_id is None:
            run_id = mine.start_run({"import": str(other.path)}, command)
        result = _judge(decision, by_sha[decision.key.sha], other, mine, run_id, evaluator, settings)
        log(f"{result.kernel}: {result.status}: {result.reason}")
        results.append(result)
    if run_id is not None:
        mine.finish_run(run_id)
    return results


def _skip_reason(decision: Decision, mine: DecisionStore, by_sha: dict, target: Target, fast_math: bool) -> str | None:
    key = decision.key
    if not (decision.verified and decision.enabled):
        return "rolled back or unverified in its store"
    if key.target != target.identity:
        return (f"made for {key.gpu_name} (sm_{key.capability}) with Triton {key.triton_version}; this machine is "
                f"{target.gpu} (sm_{target.capability}) with Triton {target.triton_version}")
    if key.sha not in by_sha:
        return "no launch of the capture has its key (kernel source, specialization, shape bucket)"
    try:
        variant = decision.variant
    except (TypeError, ValueError, AttributeError):
        return "its variant cannot be read (a damaged or hand-edited row)"
    if variant.fast_math and not fast_math:
        return "a fast-math decision: import it with --fast-math"
    held = mine.decision_for(key)
    if held is not None and held.variant_hash in (decision.variant_hash, variant_hash(as_imported(variant))):
        return "already decided and signed in the target store"
    return None


def as_imported(variant: Variant) -> Variant:
    """The foreign variant as this store keeps it: one that changes code assumes no-alias (module
    docstring)."""
    if (variant.source is None and not variant.passes) or NOALIAS in variant.assumes:
        return variant
    return dataclasses.replace(variant, assumes=(*variant.assumes, NOALIAS))


def _judge(decision: Decision, spec: LaunchSpec, other: DecisionStore, mine: DecisionStore, run_id: int,
           evaluator: Evaluator, settings: ArbiterSettings) -> ImportResult:
    variant = as_imported(decision.variant)
    cand = mine.add_candidate(run_id, decision.key, variant)
    if cand.status == "verified":  # verified here before, but its timing did not win then: judge it again
        cand = mine.reset_candidate(cand.id)
    if mine.claim(cand.id, run_id) is None:
        why = f": {cand.failure_kind}: {cand.message}" if cand.status == "rejected" else ""
        return _result(decision, SKIPPED, f"candidate {cand.id} is {cand.status} in the target store already{why}")
    unsafe = _unsafe(spec, variant, evaluator.root)
    if unsafe is not None:
        mine.finish_candidate(cand.id, "rejected", failure={"kind": UNSAFE, "message": unsafe})
        return _result(decision, REJECTED, f"unsafe: {unsafe}")
    timing, failure = evaluator.baseline(spec)
    if failure is not None or not timing or not timing.get("time_ms"):
        why = failure.message if failure is not None else (timing or {}).get("message") or "no time"
        mine.reset_candidate(cand.id)
        return _result(decision, SKIPPED, f"the baseline could not be timed here: {why}")
    base_ms, noise = float(timing["time_ms"]), timing.get("noise")
    evaluated = evaluator.candidate(spec, variant, verification_mode(variant))
    if not evaluated.trial.ok:
        failure = evaluated.failure or {"kind": evaluated.trial.failure, "message": evaluated.trial.message}
        mine.finish_candidate(cand.id, "rejected", failure=failure, verification=evaluated.verification,
                              timings=evaluated.timing)
        return _result(decision, REJECTED, f"{evaluated.trial.failure}: {evaluated.trial.message}")
    mine.finish_candidate(cand.id, "verified", verification=evaluated.verification, timings=evaluated.timing)
    verdict, confirmation = evaluator.judge(spec, variant, base_ms, evaluated.trial.time_ms, noise, settings,
                                            timing=evaluated.timing)
    held = mine.decision_for(decision.key)
    if held is not None:
        verdict = beats_held(verdict, held.speedup, noise, settings,
                             f"the target store's {describe_variant(held.variant_json)} at")
    if not verdict.accepted:
        if verdict.code not in NOT_FINAL:  # a slow or noisy timing, or not beating the held one, is no verdict
            mine.finish_candidate(cand.id, "rejected", failure={"kind": verdict.code, "message": verdict.reason})
        return _result(decision, REJECTED, f"{verdict.code}: {verdict.reason}", verdict.confirmed_speedup)
    evidence = {"imported_from": str(other.path), "foreign_evidence": decision.evidence,
                "confirmation": confirmation.to_json(), "verdict": verdict.to_json(), "noise": noise}
    mine.set_decision(decision.key, variant, baseline_ms=confirmation.base_ms, best_ms=confirmation.cand_ms,
                      evidence=evidence, run_id=run_id)
    return _result(decision, IMPORTED, verdict.reason, confirmation.ratio)


def _unsafe(spec: LaunchSpec, variant: Variant, root: str) -> str | None:
    """Why a foreign variant's source may not run here (``allowlist.sandbox.check_variant_source``
    against the user's own capture); None when it has none or passes. Every foreign source is
    checked, whatever rule it names: the other store's word for who made it proves nothing."""
    if variant.source is None:
        return None
    from tritune.allowlist import sandbox
    from tritune.capture.spec import confined_source

    try:
        sandbox.check_variant_source(confined_source(root, spec).read_text(), variant.source, spec.kernel)
    except sandbox.Unsafe as exc:
        return str(exc)
    return None


def _result(decision: Decision, status: str, reason: str, speedup: float | None = None) -> ImportResult:
    return ImportResult(decision.key.kernel, decision.key.sha, describe_variant(decision.variant_json), status, reason,
                        speedup)
