"""The loop for one kernel: TritonForge's Algorithm 1 with model-free proposers.

    baseline  <- bench(captured launch)                       (do_bench median twice: the noise;
                                                               a graph: launch-bound or not; from
                                                               the ranking's median until the first
                                                               candidates go out, see below)
    profile   <- the store's for the key, else ncu where it costs at most a tenth of the key's
                 budget (``Evaluator.profile``), else timing + static analysis; classify the bottleneck
    repeat, at most ``max_rounds`` times:
        Proposal     proposers ordered by the bottleneck, ``per_round`` candidates
        BuildRun     each candidate in an isolated worker: verify (>= 3 input sets), then bench;
                     ``jobs`` workers verify the round's candidates at once, one times them
        Remediation  a failure is classified and recorded; the proposers learn from its kind
                     (a baseline that writes outside its tensors ends the loop: nothing decided)
        Arbiter      the fastest verified candidates, fastest first: screen, then confirm by
                     interleaved re-timing; accept -> a decision in the store
        RefineHint   after an acceptance the new best is profiled; the profile delta gives hints,
                     which the proposers see (``search.family.Context``), and the new bottleneck
                     re-orders them
        finish on the round cap, diminishing returns, the roofline, an exhausted space or the budget

Every candidate is recorded in the store before it is evaluated and finished after, so an
interrupted run resumes here: ``add_candidate`` returns what was already evaluated, it becomes a
``Trial`` without running again, and the proposers (deterministic given their trials) walk the
same path. A candidate another live optimize process on the same store is evaluating is waited
for at the end of the round (``_wait_for_held``): its record is used once that process finishes
it, or it is evaluated here if that process dies. Round progress is the best *verified*
benchmark time (the descent's position); acceptance is the arbiter's, against the original
launch, and a later acceptance must beat the earlier one's confirmed ratio by more than the
noise (``arbiter.beats_held``, which ``tritune store import`` applies too).

A key the session ranked with one median (``Evaluator.baselines``) starts from that median: its
profile and the first round's proposals take it, and its full baseline (two medians, the graph
time: ~0.3 s of the timing worker on a GPU, more for a slow kernel) is timed in a thread of the
loop's as the first candidates go to the verify workers, which build them meanwhile (timed first,
it was the whole of a key's time to its first candidate, with the verify workers idle). Nothing
is judged against the median: the first round waits for the full baseline (timed then, when the
round sent nothing to build: its candidates came from the store), and a key the median puts at
its roofline is timed fully before it finishes there. A key that proposes nothing keeps the
median as its baseline.

Where a key's time goes is in its result's ``split`` (``_split``): seconds from its start to its
first candidate's submission (``to_first_s``), timing the baseline, profiling, the candidates'
verification (their build included) and timing, the arbiter's re-timing, and what is left
(``idle_s``); ``timed_candidates`` counts the candidates verified and timed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import time
from typing import Any, Callable, Iterator, Sequence

from tritune.arbiter import NOT_FINAL, Decision, Round, Verdict, beats_held, next_step
from tritune.llm.family import LLMProposer, LLMSession
from tritune.loop.evaluate import Evaluated, Evaluator, trial_from_record
from tritune.loop.families import Context, Family, families_for, order_of
from tritune.loop.jobs import full_timing
from tritune.model import families as family_names
from tritune.model.failures import BASELINE_OUT_OF_BOUNDS, ERROR
from tritune.model.key import DecisionKey
from tritune.model.launch import LaunchSpec
from tritune.model.results import CandidateLine, KernelResult
from tritune.model.settings import LoopSettings
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.profile import Facts, hints_from_delta
from tritune.search.changes import changed_knobs
from tritune.search.prior import from_prior, prior_configs, traits
from tritune.search.proposers import LaunchConfigSearch, config_of
from tritune.store import DecisionStore, variant_hash
from tritune.worker.failures import Failure

OUTCOME_CHARS = 120  # a failed candidate's message in its line (the report and the store keep all of it)
HELD_POLL_S = 0.5  # how often a candidate another optimize process is evaluating is looked at again
# A candidate's build and verification may take what is left of its kernel's budget, and never
# less than this: one that compiles for 40 s (a huge tile) no longer holds a 10 s kernel for 40 s.
CANDIDATE_FLOOR_S = 15.0
SPLIT_PARTS = ("baseline_s", "profile_s", "build_s", "verify_s", "time_s", "judge_s")  # idle_s: the rest


class KernelLoop:
    def __init__(self, spec: LaunchSpec, key: DecisionKey, *, store: DecisionStore, run_id: int,
                 evaluator: Evaluator, settings: LoopSettings, category: str = "other",
                 families: list[Family] | None = None, log: Callable[[str], None] | None = None,
                 baseline: tuple[dict | None, Failure | None] | None = None, llm: LLMSession | None = None,
                 sibling_timeouts: dict[str, str] | None = None, prior: Sequence[dict] | None = None) -> None:
        """``baseline``: ``(timing, failure)`` as the session has it: a failure, the ranking's
        one median, which the loop starts from (see the module doc), or a full timing; None or
        no time: the loop times it first. ``llm``: the run's
        ``llm.family.LLMSession`` when ``settings.llm`` is set. ``sibling_timeouts``: what
        ``store.timed_out_on_siblings`` would say, when ``store`` holds this key alone (a Ray
        lane's: ``loop.ray_lanes``); None: asked of ``store``. ``prior``: likewise, what
        ``search.prior.prior_configs`` would find in the run's store."""
        self.spec, self.key, self.store, self.run_id = spec, key, store, run_id
        self.baseline = baseline
        self._timer: concurrent.futures.ThreadPoolExecutor | None = None  # times the full baseline (``_evaluate``)
        self._full: concurrent.futures.Future | None = None  # the full baseline, timed as the first candidates build
        self._provisional = False  # base_ms is the ranking's median until the full baseline is in
        self.evaluator, self.settings, self.category = evaluator, settings, category
        if families is None:
            families = [family for family in families_for(spec, settings.fast_math, evaluator.root, llm=llm,
                                                          store=store, key=key, run_id=run_id)
                        if family.name not in settings.without]
            if settings.families:  # only those named, in the order named
                families = sorted((f for f in families if f.name in settings.families),
                                  key=lambda f: settings.families.index(f.name))
        self.families = families
        self.log = log or (lambda message: None)
        self.trials: list[Trial] = []
        self.records: list[CandidateLine] = []  # per candidate, for the report
        self._index: dict[str, CandidateLine] = {}  # variant key -> its record
        self._candidate_ids: dict[str, int] = {}  # variant key -> store candidate evaluated in this process
        self._final: set[str] = set()  # variant keys the store holds as rejected
        self.base_ms: float | None = None
        self.knob_roles: tuple[str, ...] = ()
        self.profile: dict = {}  # the latest: the baseline's, then the accepted variant's
        self.registers: int | None = None  # the baseline's, per thread
        self._held: list[tuple[Variant, Family]] = []  # claimed by another live run: waited for
        self.waited = 0  # candidates another live optimize process held when this loop proposed them
        self.busy = 0  # of those, still held when the budget ran out: not evaluated by this loop
        # variant hash -> the sibling key it timed out on (same source, GPU, Triton): not proposed here
        self._sibling_timeouts: dict[str, str] | None = None if sibling_timeouts is None else dict(sibling_timeouts)
        self._siblings_from_store = sibling_timeouts is None  # asked again each round: other lanes run siblings now
        self._skipped: set[str] = set()  # variant keys left out for that
        self._start = time.monotonic()  # run() sets it again: the budget counts from there
        self.split: dict[str, float] = dict.fromkeys(SPLIT_PARTS, 0.0)  # seconds per part (``_split``)
        self._first: float | None = None  # seconds from the start to the first candidate's submission
        # the store's configs for this kernel (search.prior), asked once, or as given
        self.prior: tuple[dict, ...] | None = None if prior is None else tuple(prior)

    # ----------------------------------------------------------------------------------- run

    def run(self) -> KernelResult:
        start = self._start = time.monotonic()
        self.split, self._first = dict.fromkeys(SPLIT_PARTS, 0.0), None  # a second run() starts afresh
        self._full, self._provisional = None, False
        result = self._result()
        try:
            return self._run(start, result)
        finally:
            if self._timer is not None:  # an exception may have left the timing unread: not waited for
                self._timer.shutdown(wait=False)
                self._timer = None

    def _run(self, start: float, result: KernelResult) -> KernelResult:
        with self._timing("baseline_s"):
            timing, failure = self._starting_baseline()
        if failure is not None or not timing or not timing.get("time_ms"):
            return self._untimed(result, start, timing, failure)
        base_ms, noise = float(timing["time_ms"]), timing.get("noise")
        self.base_ms = base_ms
        _baseline_into(result, base_ms, timing)
        with self._timing("profile_s"):
            profile = self._profile(timing)
        result.bottleneck = _short(profile.get("bottleneck"))
        result.profile_source, result.profile_note = profile.get("source"), profile.get("note", "")
        order, self.knob_roles = self._order(profile.get("bottleneck"))
        self.profile, self.registers = profile, (profile.get("facts") or {}).get("registers")

        best = _Best(Variant(), base_ms, roofline=timing.get("roofline"), facts=profile.get("facts") or {})
        self._resume_decision(best)
        known = [t.time_ms for t in self.trials if t.ok and t.time_ms]  # an interrupted run's
        descent_ms = min([base_ms] + known)
        history: list[Round] = []
        step = next_step(history, self.settings.arbiter, roofline_fraction=_fraction(best.roofline))
        if step.finished and self._provisional:  # at the roofline by the ranking's median: checked on the full one
            timing, failure = self._settle_baseline(result, best)
            if failure is not None:
                return self._untimed(result, start, timing, failure)
            base_ms, noise = float(timing["time_ms"]), timing.get("noise")
            descent_ms = min([base_ms] + known)
            step = next_step(history, self.settings.arbiter, roofline_fraction=_fraction(best.roofline))
        hints: list[dict] = []
        arbiter, costly = self.settings.arbiter, not any(not f.costly for f in self.families)
        if costly:
            arbiter = self._costly_arbiter()
        while True:
            if step.finished:
                if costly or not self._hand_over(step):
                    break
                # the model-free families are done: the costly ones get the rounds that remain
                costly, history, arbiter = True, [], self._costly_arbiter()
                step = next_step(history, arbiter, roofline_fraction=_fraction(best.roofline))
                continue
            if self._spent(start, costly):
                step = Verdict(Decision.FINISH, "budget", self._budget_reason(start))
                if self._out_of_time(start):
                    break
                continue  # the model-free families' candidate cap: the costly ones may go on
            context = self._context(best.variant, hints)
            proposals = self._propose(order, context, costly=costly)
            if not proposals:
                step = next_step(history, arbiter, _fraction(best.roofline), exhausted=True)
                continue
            done = self._evaluate(proposals)
            done += self._wait_for_held(start)
            if self._provisional:  # the round is judged against the full baseline
                timing, failure = self._settle_baseline(result, best)
                if failure is not None:
                    return self._untimed(result, start, timing, failure, candidates=True)
                base_ms, noise = float(timing["time_ms"]), timing.get("noise")
                descent_ms = min([base_ms] + known)
            unsafe = next((t for t in self.trials if t.failure == BASELINE_OUT_OF_BOUNDS), None)
            if unsafe is not None:  # every comparison with this baseline is void: decide nothing
                self.log(f"{self.spec.kernel}: not optimized: {unsafe.message}")
                wall_s = time.monotonic() - start
                result.failure, result.message, result.candidates = BASELINE_OUT_OF_BOUNDS, unsafe.message, self.records
                result.wall_s, result.split, result.timed_candidates = wall_s, self._split(wall_s), self._timed_count()
                return result
            timed = sorted((e for e in done if e is not None and e.trial.ok), key=lambda e: e.trial.time_ms)
            round_start = descent_ms
            descent_ms = min([descent_ms] + [e.trial.time_ms for e in timed])
            accepted = self._arbitrate(timed, base_ms, noise, best)
            if accepted is not None:
                with self._timing("profile_s"):
                    after = self.evaluator.profile(self.spec, accepted.timing, accepted.trial.variant,
                                                   budget_s=self.settings.budget_s)
                hints = [dict(action=h.action, text=h.text)
                         for h in hints_from_delta(Facts.from_mapping(best.facts),
                                                   Facts.from_mapping(after.get("facts") or {}))]
                best.facts = after.get("facts") or {}
                if after.get("bottleneck"):
                    order, self.knob_roles = self._order(after["bottleneck"])
                    self.profile = after
                self.store.set_profile(self.key, after, variant=accepted.trial.variant, run_id=self.run_id)
            history.append(Round(round_start, descent_ms, accepted=int(accepted is not None),
                                 seeded=_seeded(self.spec, context, proposals)))
            step = next_step(history, arbiter, roofline_fraction=_fraction(best.roofline))

        llm = next((f.proposer for f in self.families if isinstance(f.proposer, LLMProposer)), None)
        if llm is not None:
            result.llm = llm.summary(self._context(best.variant, hints))
        wall_s = time.monotonic() - start
        result.rounds, result.finish, result.finish_reason, result.hints = len(history), step.code, step.reason, hints
        result.candidates, result.waited, result.busy, result.skipped = self.records, self.waited, self.busy, \
            len(self._skipped)
        result.wall_s, result.split, result.timed_candidates = wall_s, self._split(wall_s), self._timed_count()
        return self._decided(result, best, base_ms)

    def _decided(self, result: KernelResult, best: _Best, base_ms: float) -> KernelResult:
        """``result`` with the key's decision (its best variant, speedup and knobs), or none."""
        if best.ratio is None:
            result.best_ms, result.speedup, result.won_by = base_ms, 1.0, []
            return result
        result.accepted, result.decision = True, variant_name(best.variant)
        result.decision_hash, result.best_ms, result.speedup = variant_hash(best.variant), best.ms, best.ratio
        result.roofline_after, result.won_by = best.roofline, changed_knobs(self.spec, best.variant)
        return result

    # ------------------------------------------------------------------------------ proposal

    def _context(self, accepted: Variant, hints: list[dict]) -> Context:
        return Context(self.spec, self.trials, root=self.evaluator.root, fast_math=self.settings.fast_math,
                       profile=self.profile, knob_roles=self.knob_roles, hints=tuple(hints), accepted=accepted,
                       registers=self.registers, baseline_ms=self.base_ms, prior=self._prior())

    def _prior(self) -> tuple[dict, ...]:
        if self.prior is None:
            self.prior = tuple(prior_configs(self.store, self.key, self.spec, self.category, run_id=self.run_id))
        return self.prior

    def _order(self, bottleneck: dict | None) -> tuple[list[str], tuple[str, ...]]:
        """The families' order (``--families``' when given, else the bottleneck's) and knob roles."""
        order, knobs = order_of(bottleneck)
        return (list(self.settings.families) if self.settings.families else order), knobs

    def _hand_over(self, step: Verdict) -> bool:
        """Whether the costly families get the rounds after the model-free ones finished with
        ``step``: not when the budget is spent or the roofline reached."""
        spent = step.code == "budget" and self._out_of_time(self._start)
        return not spent and step.code != "roofline" and any(f.costly for f in self.families)

    def _costly_arbiter(self) -> Any:
        """The costly phase stops when its families have nothing left (their own caps:
        ``--llm-rounds``), the budget or the roofline, not after a few flat rounds: a model's
        attempt often needs its fixes before it gains."""
        rounds = 1 << 16
        return dataclasses.replace(self.settings.arbiter, max_rounds=rounds, patience=rounds)

    def _propose(self, order: list[str], context: Context, costly: bool = False) -> list[tuple[Variant, Family]]:
        """Up to ``per_round`` untried variants, shared out in the bottleneck's order: the most
        promising family takes half the round, every other family one slot, and what a family
        leaves goes back to the others in order. A family late in the order still gets tried
        within a small ``--max-candidates`` (the first family alone would fill every round).
        ``costly``: the costly families' phase instead, one candidate a round (a model's next
        attempt depends on the last one's outcome), outside ``--max-candidates``."""
        if self._siblings_from_store:
            self._sibling_timeouts = None  # asked of the store again: a lane beside this one may have timed out since
        cheap_trials = sum(1 for t in self.trials if not _costly_variant(t.variant))
        families = sorted((f for f in self.families if f.costly == costly), key=lambda f: _rank(order, f.name))
        round_size = self.settings.per_round if costly else self._round_size(context, families)
        left = 1 if costly else min(round_size, self.settings.max_candidates - cheap_trials)
        seen = {t.variant.key() for t in self.trials}
        taken: dict[str, list[Variant]] = {family.name: [] for family in families}
        dropped = {family.name: 0 for family in families}  # this round's variants skipped for a sibling's timeout

        def take(family: Family, count: int) -> None:
            """``count`` more of ``family``'s variants. A proposer skips tried variants, not this
            round's picks nor its skipped ones, so it is asked for those too; a variant skipped for
            a sibling's timeout takes no slot: the proposer is asked again, for one more."""
            nonlocal left
            while count > 0 and left > 0:
                new = False
                for variant in family.propose(context, len(taken[family.name]) + dropped[family.name] + count):
                    if variant.key() in seen or variant.is_baseline:
                        continue
                    seen.add(variant.key())
                    new = True
                    if self._timed_out_on_a_sibling(variant):
                        dropped[family.name] += 1
                        continue
                    taken[family.name].append(variant)
                    left, count = left - 1, count - 1
                    if left <= 0 or count <= 0:
                        return
                if not new:  # the family has nothing more
                    return

        first = (left + 1) // 2
        for i, family in enumerate(families):
            take(family, first if i == 0 else 1)
        for family in families:
            take(family, left)
        return [(variant, family) for family in families for variant in taken[family.name]]

    def _round_size(self, context: Context, families: list[Family]) -> int:
        """``per_round``, or far from the roofline the config search's whole first group (its
        seeds and spanning configs, ``LaunchConfigSearch.first_round_size``) plus a slot for each
        other family: the span is built and verified at once (``--jobs`` workers), not two
        configs a round over several rounds."""
        if not any(f.name == LaunchConfigSearch.name for f in families):
            return self.settings.per_round
        search = LaunchConfigSearch.for_context(context)  # built once: it reads the kernel's source
        if not search.far():
            return self.settings.per_round
        first = search.first_left(context.spec, context.trials)  # 0 once the first group is tried
        return max(self.settings.per_round, first + len(families) - 1) if first else self.settings.per_round

    def _timed_out_on_a_sibling(self, variant: Variant) -> bool:
        """A variant that timed out on another key of this kernel's source (the same compile for
        other shapes, e.g. a config whose build takes 40 s) is not tried again here: it would spend
        this key's budget the same way. Said once per variant. The store is asked once a round
        (``_propose``), not once a key: with several lanes, a sibling key running on another lane
        may time out on a config while this key is still proposing."""
        if self._sibling_timeouts is None:
            self._sibling_timeouts = self.store.timed_out_on_siblings(self.key)
        sibling = self._sibling_timeouts.get(variant_hash(variant))
        if sibling is None:
            return False
        if variant.key() not in self._skipped:
            self._skipped.add(variant.key())
            self.log(f"{self.spec.kernel}: {variant_name(variant)} skipped: it timed out on a sibling key "
                     f"({sibling[:10]})")
        return True

    # -------------------------------------------------------------------------- build and run

    def _evaluate(self, proposals: list[tuple[Variant, Family]]) -> list[Evaluated | None]:
        """The round's candidates, recorded in the store first (in proposal order: one evaluated
        before an interruption is reused, one another live run holds is left for
        ``_wait_for_held``, the rest are claimed), then the claimed ones built, verified and timed
        by the evaluator (in parallel with ``--jobs``) and finished in the store in proposal
        order, from this thread only: trials, records and store rows come out the same however
        many workers ran them."""
        planned = []
        for variant, family in proposals:
            cand = self.store.add_candidate(self.run_id, self.key, variant)
            if not cand.done and self.store.claim(cand.id, self.run_id) is None:
                self._held.append((variant, family))  # another live optimize process evaluates it
                continue
            planned.append((variant, family, cand))
        work = [(variant, family) for variant, family, cand in planned if not cand.done]
        for variant, family in work:
            self.log(f"{self.spec.kernel}: {family.name} {variant_name(variant)} ({family.mode(variant)})")
        begin, done = time.monotonic(), []
        if work and self._first is None:
            self._first = begin - self._start
            if self._provisional:  # timed while the verify workers build the round
                self._timer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tritune-baseline")
                self._full = self._timer.submit(self.evaluator.baseline, self.spec)
        items = [(variant, family.mode(variant)) for variant, family in work]
        limit = max(CANDIDATE_FLOOR_S, self.settings.budget_s - (begin - self._start))
        with contextlib.closing(self.evaluator.candidates(self.spec, items, verify_timeout_s=limit)) as results:
            for variant, family, cand in planned:
                if cand.done:
                    done.append(self._reuse(variant, family, cand))
                else:
                    done.append(self._finish(variant, family, cand, next(results)))
        share = (time.monotonic() - begin) / len(work) if work else 0.0
        for variant, _ in work:  # what a candidate cost, with the others of its round running beside it
            self._index[variant.key()].share_s = share
        return done

    def _reuse(self, variant: Variant, family: Family, cand: Any) -> Evaluated | None:
        """A candidate evaluated before this run was interrupted: its record, not a rerun."""
        if cand.status == "rejected":  # the store's verdict is final: never judged again
            self._final.add(variant.key())
        verified = bool((cand.verification or {}).get("ok"))
        trial = trial_from_record(variant, cand.status, cand.failure_kind, cand.message, cand.timings, verified)
        self.trials.append(trial)
        self._record(variant, family, trial, reused=True, status=cand.status,
                     notes=(cand.verification or {}).get("notes"))
        said = (f"rejected by the arbiter ({cand.failure_kind})" if cand.status == "rejected" and trial.ok
                else self._outcome(trial))
        self.log(f"{self.spec.kernel}: {variant_name(variant)}: {said} (recorded before)")
        return Evaluated(trial, cand.verification, cand.timings) if trial.ok else None

    def _finish(self, variant: Variant, family: Family, cand: Any, evaluated: Evaluated) -> Evaluated:
        self.trials.append(evaluated.trial)
        if evaluated.trial.ok:
            self.store.finish_candidate(cand.id, "verified", verification=evaluated.verification,
                                        timings=evaluated.timing)
        else:
            failure = evaluated.failure or {"kind": evaluated.trial.failure, "message": evaluated.trial.message}
            self.store.finish_candidate(cand.id, "rejected", failure=failure, verification=evaluated.verification,
                                        timings=evaluated.timing)
        self._record(variant, family, evaluated.trial, seconds=evaluated.seconds, split=evaluated.split,
                     mode=family.mode(variant), status="verified" if evaluated.trial.ok else "rejected",
                     notes=(evaluated.verification or {}).get("notes"))
        self._candidate_ids[variant.key()] = cand.id
        self.log(f"{self.spec.kernel}: {variant_name(variant)}: {self._outcome(evaluated.trial)}")
        return evaluated

    def _outcome(self, trial: Trial) -> str:
        """What became of a candidate, in a few words: verified at its time (and its ratio to the
        baseline, the ranking's median until the full one is in), or failed with its class."""
        if trial.ok and trial.time_ms:
            ratio = f", {self.base_ms / trial.time_ms:.2f}x the baseline" if self.base_ms else ""
            return f"verified, {trial.time_ms:.4g} ms{ratio}"
        why = " ".join((trial.message or "").split())[:OUTCOME_CHARS]
        return f"failed ({trial.failure or ERROR})" + (f": {why}" if why else "")

    def _wait_for_held(self, start: float) -> list[Evaluated | None]:
        """The round's candidates another live optimize process held, looked at again until that
        process finished them (their records are used, as on a resume) or died (``add_candidate``
        hands them to this run: evaluated here). One still held when the kernel's budget is
        spent becomes a ``busy`` trial, counted in the result (it was once dropped silently)."""
        done: list[Evaluated | None] = []
        self.waited += len(self._held)
        while self._held:
            held, self._held = self._held, []
            if time.monotonic() - start > self.settings.budget_s:
                for variant, family in held:
                    trial = Trial(variant, False, failure="busy",
                                  message="another optimize run held it until this kernel's budget was spent")
                    self.trials.append(trial)
                    self._record(variant, family, trial, status="busy")
                self.busy += len(held)
                break
            time.sleep(HELD_POLL_S)
            done += self._evaluate(held)
        return done

    # ------------------------------------------------------------------------------- arbiter

    def _arbitrate(self, timed: list[Evaluated], base_ms: float, noise: float | None,
                   best: _Best) -> Evaluated | None:
        """Fastest first: the first candidate the arbiter accepts becomes the decision."""
        if self._provisional:  # never against the ranking's median: _run re-bases first
            raise RuntimeError(f"{self.spec.id}: judged before its full baseline was timed")
        settings = self.settings.arbiter
        for evaluated in timed:
            trial = evaluated.trial
            if trial.time_ms >= best.ms:
                break  # sorted: none after this beats the best either
            if trial.variant.key() in self._final:
                continue  # rejected by the arbiter in an earlier run: its record is final
            with self._timing("judge_s"):
                verdict, confirmation = self.evaluator.judge(self.spec, trial.variant, base_ms, trial.time_ms,
                                                             noise, settings, timing=evaluated.timing)
            verdict = beats_held(verdict, best.ratio, noise, settings)
            self._judged(trial.variant, verdict)
            if not verdict.accepted:
                continue
            evidence = {"confirmation": confirmation.to_json(), "verdict": verdict.to_json(), "noise": noise}
            self.store.set_decision(self.key, trial.variant, baseline_ms=confirmation.base_ms,
                                    best_ms=confirmation.cand_ms, evidence=evidence, run_id=self.run_id,
                                    traits=traits(self.spec, self.key, self.category, trial.variant))
            best.variant, best.ms, best.ratio = trial.variant, trial.time_ms, confirmation.ratio
            best.roofline = (evaluated.timing or {}).get("roofline")
            self.log(f"{self.spec.kernel}: accepted {variant_name(trial.variant)}: {verdict.reason}")
            return evaluated
        return None

    def _judged(self, variant: Variant, verdict: Verdict) -> None:
        record = self._index.get(variant.key())
        if record is None:
            return
        record.verdict, record.reason, record.confirmed = verdict.code, verdict.reason, verdict.confirmed_speedup
        if verdict.accepted:
            for other in self.records:  # the store moved the previous decision back to verified
                if other.status == "accepted":
                    other.status, other.verdict = "verified", "superseded"
            record.status = "accepted"
            return
        cand_id = self._candidate_ids.get(variant.key())
        if cand_id is not None and verdict.code not in NOT_FINAL:
            # re-timed and turned down: the store keeps the arbiter's reason with the candidate
            self.store.finish_candidate(cand_id, "rejected", failure={"kind": verdict.code, "message": verdict.reason})
            record.status, record.failure = "rejected", verdict.code

    # ------------------------------------------------------------------------------ helpers

    def _starting_baseline(self) -> tuple[dict | None, Failure | None]:
        """What the loop starts from: the session's failure or full timing, the ranking's median
        (``_provisional``: the full one is timed as the first candidates go out), or, given no
        time, the full baseline timed now."""
        timing, failure = self.baseline if self.baseline is not None else (None, None)
        if failure is not None or full_timing(timing):
            return timing, failure
        if not timing or not timing.get("time_ms"):
            return self.evaluator.baseline(self.spec)
        self._provisional = True
        return timing, None

    def _full_baseline(self) -> tuple[dict | None, Failure | None]:
        """The full baseline timed as the first candidates went out, waited for; timed now when
        none went out (every candidate of the round was reused from the store or held by
        another run)."""
        self._provisional = False
        with self._timing("baseline_s"):
            if self._full is None:
                return self.evaluator.baseline(self.spec)
            return self._full.result()  # a lost worker raises here, as the loop's own timing would

    def _settle_baseline(self, result: KernelResult, best: _Best) -> tuple[dict | None, Failure | None]:
        """The full baseline (``_full_baseline``) in place of the ranking's median: in
        ``result``, ``best`` and the candidates' records (their speedups were taken against the
        median). A timing with no time comes back as a failure."""
        timing, failure = self._full_baseline()
        if failure is not None or not timing or not timing.get("time_ms"):
            why = (timing or {}).get("message") or "no time"
            return timing, failure or Failure(ERROR, why)
        base_ms = self.base_ms = float(timing["time_ms"])
        for record in self.records:
            if record.speedup is not None and record.time_ms:
                record.speedup = base_ms / record.time_ms
        _baseline_into(result, base_ms, timing)
        if best.ratio is None:
            best.ms, best.roofline = base_ms, timing.get("roofline")
        else:  # a decision of an earlier run, its time scaled from this run's baseline
            best.ms = base_ms / best.ratio
        return timing, None

    def _untimed(self, result: KernelResult, start: float, timing: dict | None, failure: Failure | None,
                 candidates: bool = False) -> KernelResult:
        """The result of a key whose baseline could not be timed: nothing is judged against it."""
        why = failure.message if failure is not None else (timing or {}).get("message") or "no time"
        wall_s = time.monotonic() - start
        result.failure = failure.kind if failure is not None else ERROR
        result.message, result.wall_s, result.split = f"baseline could not be timed: {why}", wall_s, self._split(wall_s)
        result.baseline_ms = result.bytes = result.floor_ms = result.roofline_before = result.roofline_after = None
        if candidates:
            result.candidates, result.timed_candidates = self.records, self._timed_count()
        return result

    def _profile(self, timing: dict) -> dict:
        """The baseline's profile: the store's when it holds one (no cost: ``note`` says it was
        reused), else the evaluator's within this key's budget (``Evaluator.profile``: ncu only
        where it costs at most its share of the budget)."""
        stored = self.store.profile_for(self.key)
        if stored:
            stored = dict(stored)
            stored["note"] = f"reused from the store ({stored.get('source')}): {stored.get('note', '')}"
            return stored
        profile = self.evaluator.profile(self.spec, timing, budget_s=self.settings.budget_s)
        if profile.get("ncu_status") != "skipped":  # a skipped ncu is this budget's choice, not the key's profile
            self.store.set_profile(self.key, profile, run_id=self.run_id)
        return profile

    @contextlib.contextmanager
    def _timing(self, part: str) -> Iterator[None]:
        """The seconds of the block added to ``split[part]``."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.split[part] += time.monotonic() - began

    def _split(self, wall_s: float) -> dict[str, float]:
        """Where the key's ``wall_s`` went (``results.SPLIT_KEYS``). The candidates' parts sum
        each candidate's own seconds in its workers (``Evaluated.split``): ``verify_s`` holds its
        build too (the worker compiles inside verification and does not report the compile
        apart), so ``build_s`` is 0; with ``--jobs`` they overlap and may sum past the wall
        time, idle_s is then 0. ``to_first_s`` is left out when no candidate was submitted."""
        split = dict(self.split)  # baseline_s, profile_s and judge_s, timed here
        for record in self.records:
            if not record.reused and record.status != "busy":
                split["verify_s"] += record.verify_s or 0.0
                split["time_s"] += record.time_s or 0.0
        split["idle_s"] = max(0.0, wall_s - sum(split[name] for name in SPLIT_PARTS))
        split = {name: round(seconds, 4) for name, seconds in split.items()}
        if self._first is not None:
            split["to_first_s"] = round(self._first, 4)
        return split

    def _timed_count(self) -> int:
        """Candidates verified and timed, this run's and those reused from an interrupted one."""
        return sum(1 for t in self.trials if t.ok and t.time_ms is not None)

    def _resume_decision(self, best: _Best) -> None:
        """A decision this key already has (an earlier or interrupted run): later ones must beat it."""
        decision = self.store.decision_for(self.key)
        if decision is None:
            return
        # its benchmark time is from another worker: scaled from this run's baseline by its ratio
        best.variant, best.ratio, best.ms, best.roofline = (decision.variant, decision.speedup,
                                                            best.ms / decision.speedup, None)

    def _record(self, variant: Variant, family: Family, trial: Trial, *, status: str, seconds: float = 0.0,
                split: dict | None = None, mode: str | None = None, reused: bool = False,
                notes: list[str] | None = None) -> None:
        """The candidate's line in the results. Seconds: ``seconds`` from submission to result,
        split into ``verify_s`` + ``time_s`` + ``wait_s`` (``Evaluator``); ``share_s`` its round's
        wall time over the candidates evaluated in it (with N running at once, what one cost).
        ``notes``: its verification's notes (a large peak-memory increase), reported, not rejections."""
        speedup = self.base_ms / trial.time_ms if trial.ok and trial.time_ms else None
        split = split or {}
        record = CandidateLine(variant_name(variant), variant_hash(variant), family.name, mode or family.mode(variant),
                               status, trial.failure, trial.message, trial.time_ms, speedup, seconds,
                               split.get("verify_s"), split.get("time_s"), split.get("wait_s"), reused=reused,
                               notes=list(notes or []),
                               prior=family.name == LaunchConfigSearch.name and from_prior(self.spec, self._prior(),
                                                                                            variant))
        self.records.append(record)
        self._index[variant.key()] = record

    def _spent(self, start: float, costly: bool = False) -> bool:
        """The budget is spent, or (model-free families) their candidate cap is reached."""
        return self._out_of_time(start) or (not costly and self._capped())

    def _out_of_time(self, start: float) -> bool:
        return time.monotonic() - start > self.settings.budget_s

    def _capped(self) -> bool:
        return sum(1 for t in self.trials if not _costly_variant(t.variant)) >= self.settings.max_candidates

    def _budget_reason(self, start: float) -> str:
        if not self._out_of_time(start) and self._capped():
            return f"{len(self.trials)} candidates tried, the cap is {self.settings.max_candidates}"
        return f"{time.monotonic() - start:.0f} s spent, the budget is {self.settings.budget_s:.0f} s per kernel"

    def _result(self) -> KernelResult:
        return KernelResult(id=self.spec.id, kernel=self.spec.kernel, kind=self.spec.kind, category=self.category,
                            launches=self.spec.count, key_sha=self.key.sha, wall_s=0.0)


@dataclasses.dataclass
class _Best:
    """The best so far: the decision held (a ``ratio``, confirmed against the baseline) or the
    baseline itself (``ratio`` None); ``ms`` its benchmark time, ``facts`` its profile's."""

    variant: Variant
    ms: float
    ratio: float | None = None
    roofline: float | None = None
    facts: dict = dataclasses.field(default_factory=dict)


def _baseline_into(result: KernelResult, base_ms: float, timing: dict) -> None:
    """The baseline's time, bytes and roofline floor, and its fraction of the roofline (before, and
    after until a decision changes it)."""
    result.baseline_ms, result.bytes, result.floor_ms = base_ms, timing.get("bytes"), timing.get("floor_ms")
    result.roofline_before = result.roofline_after = timing.get("roofline")


def variant_name(variant: Variant) -> str:
    """What a variant changes: its proposer's name for it (a cache-hint source rewrite says which
    loads), else the changed options and constexprs."""
    return variant.name if variant.name != "baseline" else variant.describe()


def _short(bottleneck: dict | None) -> dict | None:
    if not bottleneck:
        return None
    return {"kind": bottleneck.get("kind"), "reason": bottleneck.get("reason"),
            "missing": list(bottleneck.get("missing") or ()),
            "hints": [h.get("text") if isinstance(h, dict) else str(h) for h in bottleneck.get("hints") or ()]}


def _fraction(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _costly_variant(variant: Variant) -> bool:
    """Made by the model family (its variants name it as the rule that made their source)."""
    return family_names.by_model(variant)


def _rank(order: list[str], name: str) -> int:
    return order.index(name) if name in order else len(order)


def _seeded(spec: LaunchSpec, context: Context, proposals: list[tuple[Variant, Family]]) -> bool:
    """Whether the round tried one of the config search's seeds (an Inductor kernel's max-autotune
    configs, ``search.inductor_configs.seeds``): such a round is not a flat one (``Round.seeded``).
    Seeds come in Inductor's order before the descent, two a round when the config search is
    first: with the arbiter's patience of two flat rounds, the last seeds would otherwise be cut."""
    seeds = LaunchConfigSearch.for_context(context).seed_configs(spec)  # whole configs, as it proposes them
    return any(config_of(spec, variant) in seeds for variant, family in proposals
               if family.name == LaunchConfigSearch.name)
