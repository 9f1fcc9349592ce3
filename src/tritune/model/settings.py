"""How a run is asked to search, as values: the arbiter's, the model family's and the loop's settings.

``LoopSettings`` travels from the command line to every lane (a Ray lane's too) and names the run
that a later command resumes (``to_json``); ``ArbiterSettings`` is the bar a candidate must pass
and when the loop finishes (``tritune.arbiter``); ``LLMSettings`` the optional model family's
endpoint and limits (``tritune.llm``). The key of the endpoint is never here: it is read from the
environment where a request is made (``tritune.config``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ArbiterSettings:
    threshold: float = 1.05  # speedup a candidate must reach (TritonForge's success bar)
    max_rounds: int = 8  # TritonForge's iteration cap
    patience: int = 2  # rounds in a row gaining < min_gain before finishing
    min_gain: float = 0.01  # a round "improved" when best time fell by >= 1%
    roofline_target: float = 0.9  # finish at >= 90% of copy bandwidth: copy itself is the ceiling
    require_meaningful: bool = True  # False only in CPU end-to-end tests: interpreter times decide nothing

    def __post_init__(self) -> None:
        if not self.threshold >= 1.0:
            raise ValueError(f"arbiter threshold {self.threshold} is below 1.0: a slower candidate would be accepted")
        if self.max_rounds < 1 or self.patience < 1:
            raise ValueError(f"arbiter max_rounds ({self.max_rounds}) and patience ({self.patience}) must be >= 1")
        if self.min_gain < 0 or not 0 < self.roofline_target <= 1.5:
            raise ValueError(f"arbiter min_gain {self.min_gain} must be >= 0 and roofline_target "
                             f"{self.roofline_target} a fraction of copy bandwidth")


@dataclasses.dataclass(frozen=True)
class LLMSettings:
    url: str
    model: str
    rounds: int = 8  # proposals per kernel (TritonForge's cap)
    max_tokens: int = 4096
    fixes: int = 2  # remediations per proposal
    price: tuple[float, float] | None = None  # dollars per million tokens in, out
    dry_run: str | None = None  # a folder the prompts are written to; nothing is sent
    timeout_s: float = 300.0  # a reply's read timeout (a long answer from a slow server takes minutes)
    retries: int = 4  # on 429, 5xx and timeouts, with backoff (``llm.client``)
    # The prompt templates' version (``llm.prompts.version``): a run asked with other templates is
    # another run. The optimize session fills it in (``loop.session.optimize``).
    template: str = ""

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.max_tokens < 1 or self.fixes < 0:
            raise ValueError(f"llm rounds ({self.rounds}) and max tokens ({self.max_tokens}) must be positive, "
                             f"fixes ({self.fixes}) not negative")

    def to_json(self) -> dict:
        """What names the run (a resumed run must ask the same way); the price changes nothing asked."""
        body = {"url": self.url, "model": self.model, "rounds": self.rounds, "max_tokens": self.max_tokens,
                "fixes": self.fixes, "template": self.template}
        if self.dry_run:
            body["dry_run"] = True
        return body


@dataclasses.dataclass(frozen=True)
class LoopSettings:
    arbiter: ArbiterSettings = ArbiterSettings()
    per_round: int = 4  # candidates built per round (TritonForge proposes one; a descent step has ~2)
    max_candidates: int = 24  # per kernel: ~1-2 s each on a GPU keeps a kernel near a minute
    budget_s: float = 900.0  # wall time per kernel; the loop finishes the round it is in
    fast_math: bool = False  # allow the fast-math pass set (verified with max relative error 1e-4)
    use_ncu: str = "auto"  # "auto" | "never" | "require"
    # Workers building and verifying candidates at once (Evaluator). How fast, never what is
    # decided: left out of to_json, which names the run that a later command resumes.
    jobs: int = 1
    without: tuple[str, ...] = ()  # family names left out (a benchmark with and without one)
    families: tuple[str, ...] = ()  # only these families, in this order (``--families``); () = all, the bottleneck's order
    llm: LLMSettings | None = None  # ``--llm``: the model's family joins the others
    # ``--unsafe-no-jail``: the workers run unjailed (``worker.jail``). Where, never what, is
    # decided: left out of to_json, like jobs.
    unsafe_no_jail: bool = False

    def __post_init__(self) -> None:
        if self.per_round < 1 or self.max_candidates < 1 or self.budget_s <= 0 or self.jobs < 1:
            raise ValueError(f"per_round ({self.per_round}), max_candidates ({self.max_candidates}), "
                             f"budget_s ({self.budget_s}) and jobs ({self.jobs}) must be positive")
        if self.use_ncu not in ("auto", "never", "require"):
            raise ValueError(f"use_ncu must be auto, never or require, not {self.use_ncu!r}")

    def to_json(self) -> dict:
        body = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        body["arbiter"] = dataclasses.asdict(self.arbiter)
        del body["jobs"], body["unsafe_no_jail"]
        # keys an older run's settings did not have are left out while unset, so a later
        # command resumes that run
        if self.without:
            body["without"] = sorted(self.without)
        else:
            del body["without"]
        if self.families:
            body["families"] = list(self.families)
        else:
            del body["families"]
        if self.llm is not None:
            body["llm"] = self.llm.to_json()
        else:
            del body["llm"]
        return body
