"""Does a Ray lane's ``run_key`` reply agree with itself? Checked by the driver before it signs
anything (``loop.ray_lanes``, issue 23).

An actor returns two accounts of one key: the result it reports (``KernelResult`` JSON, what
``optimize.json`` shows) and the key's records (``DecisionStore.key_records``, what the driver
signs into the store and ``tritune run`` applies). A node that runs other code could make them
differ: report ``decision: null`` while its records carry an accepted decision, which the
driver would sign and apply unseen. ``records_problem`` says where they disagree:

- every candidate the result reports as evaluated has its record (same variant hash), with the
  same status, the same time (``time_ms`` against the record's ``timings``) and, when rejected,
  the same failure kind;
- every record is either one the result reports or one the driver sent (a resumed key's), and a
  record the driver sent comes back unchanged, but for an accepted one that a new decision of
  the key moved back to verified (as ``DecisionStore.set_decision`` does);
- a decision in the records that the driver did not send is the result's decision: the result
  is accepted with that variant (hash and name), its candidate reported accepted, its speedup the
  confirmation's ratio; a result that is accepted has such a decision (or the one the driver sent,
  kept, at that decision's own speedup).

Agreement is not truth: an actor can still lie consistently (the cluster is trusted as the user,
``loop.ray_lanes``). What this stops is a reply whose two halves tell two stories.
"""

from __future__ import annotations

import math
from typing import Any

from tritune.loop.kernel import variant_name
from tritune.model.variant import Variant
from tritune.store.records import DONE, variant_hash


def records_problem(result: dict, records: dict, sent: dict) -> str | None:
    """What is wrong with ``records`` (the actor's ``key_records``) for its ``result``, given the
    records the driver ``sent`` with the key, in a few words; None when they agree."""
    try:
        return _problem(result, records, sent)
    except (TypeError, ValueError, AttributeError, KeyError, ZeroDivisionError) as exc:
        return f"a record or result entry not in its form ({type(exc).__name__})"


def _problem(result: dict, records: dict, sent: dict) -> str | None:
    returned, before = _by_hash(records.get("candidates")), _by_hash(sent.get("candidates"))
    reported = [entry for entry in result.get("candidates") or () if entry.get("status") in DONE]  # not "busy"
    for entry in reported:
        problem = _agrees(entry, returned.get(entry.get("variant_hash")))
        if problem is not None:
            return problem
    listed = {entry["variant_hash"] for entry in reported}
    decision, kept = records.get("decision"), sent.get("decision")
    replaced = decision is not None and decision != kept  # a new decision: the driver's accepted one is verified again
    for digest, body in returned.items():
        if digest not in before and digest not in listed:
            return f"a record of {_short(digest)} that the result does not report"
        if digest in before and body != before[digest] and not (replaced and _demoted(before[digest], body)):
            return f"the record of {_short(digest)} the driver sent came back changed"
    accepted = {entry["variant_hash"] for entry in reported if entry["status"] == "accepted"}
    return _decision_problem(result, decision, kept, accepted)


def _by_hash(candidates: Any) -> dict[str, dict]:
    """Candidate records by their variant's hash; ``ValueError`` for one variant recorded twice
    (a store holds one row per key and variant)."""
    found: dict[str, dict] = {}
    for body in candidates or ():
        if not isinstance(body, dict) or not isinstance(body.get("variant"), dict):
            raise TypeError("a candidate record without a variant")
        digest = variant_hash(body["variant"])
        if digest in found:
            raise ValueError("a variant recorded twice")
        found[digest] = body
    return found


def _agrees(entry: dict, body: dict | None) -> str | None:
    """Whether a reported candidate and its record tell the same: status, time, failure kind."""
    name = entry.get("variant") or _short(entry.get("variant_hash"))
    if body is None:
        return f"{name}: reported {entry.get('status')}, but not among the records"
    if body.get("status") != entry.get("status"):
        return f"{name}: reported {entry.get('status')}, recorded {body.get('status')}"
    timings = body.get("timings")
    recorded_ms = timings.get("time_ms") if isinstance(timings, dict) else None
    if (entry.get("time_ms") is not None or entry["status"] != "rejected") and entry.get("time_ms") != recorded_ms:
        return f"{name}: reported {entry.get('time_ms')} ms, recorded {recorded_ms} ms"
    if entry["status"] == "rejected" and entry.get("failure") != body.get("failure_kind"):
        return f"{name}: reported rejected for {entry.get('failure')}, recorded for {body.get('failure_kind')}"
    return None


def _demoted(sent: dict, body: dict) -> bool:
    """The driver's accepted candidate, moved back to verified (by a new decision for the key)."""
    return sent.get("status") == "accepted" and {**sent, "status": "verified"} == body


def _decision_problem(result: dict, decision: Any, kept: Any, reported_accepted: set[str]) -> str | None:
    """Whether the records' decision is the result's (module docstring); ``reported_accepted``:
    the variant hashes the result reports accepted."""
    accepted = result.get("accepted") is True
    if decision is None:
        return f"the result reports decision {result.get('decision')!r}, the records none" if accepted else None
    if not accepted:
        if decision != kept:
            return "the records hold a decision the result does not report"
        return None  # the driver's own, unchanged (a key whose baseline failed this time)
    if not isinstance(decision, dict) or decision.get("enabled") is not True:
        return "the result reports a decision, the records a rolled-back one"
    digest = variant_hash(decision["variant"])
    if digest != result.get("decision_hash") or _name(decision["variant"]) != result.get("decision"):
        return f"the result reports decision {result.get('decision')!r}, the records another variant"
    if decision == kept:
        expected = decision["baseline_ms"] / decision["best_ms"]  # the loop resumes it at that speedup
    else:
        if digest not in reported_accepted:
            return "the records' decision is not a candidate the result reports accepted"
        expected = ((decision.get("evidence") or {}).get("confirmation") or {}).get("ratio")
    speedup = result.get("speedup")
    if not _numbers(speedup, expected) or not math.isclose(speedup, expected, rel_tol=1e-9):
        return f"the result reports speedup {speedup!r}, the records' decision {expected!r}"
    return None


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def _name(body: dict) -> str:
    return variant_name(Variant.from_json(body))


def _short(digest: Any) -> str:
    return f"variant {str(digest)[:10]}"
