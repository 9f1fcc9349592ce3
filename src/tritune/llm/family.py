"""The LLM proposer family: TritonForge's proposal and remediation roles behind any endpoint.

One proposer per kernel, one candidate a round. A round either **proposes** (the prompt holds the
GPU's facts, the kernel's source, the captured launch, the profile and its bottleneck, tritune's
refine hints, the best variant so far and the last two attempts with their outcomes) or
**remediates** the last candidate (its failure class and message cut to 300 characters: seed 004's
taxonomy), up to ``fixes`` times a proposal. ``rounds`` caps the proposals (TritonForge: 8).

A reply becomes a candidate only through the same gates as every other: its first python block is
checked by the sandbox (``allowlist.sandbox``: nothing of an unsafe reply runs), spliced into the
captured source by function name (``llm.reply``: the kernel keeps its parameter names), then built,
verified and timed in the isolated workers and judged by the arbiter. A reply refused before it
runs (no code, unsafe, syntax, changed parameters, a repeat) is stored with why, and goes back to
the model as a failure in the same round while fixes remain.

Every exchange is stored (``store.exchanges``) under the hash of its prompt: an interrupted run
resumes without asking the model again for what it already has, and the report shows them. The
key is read from the environment by the client only; nothing here holds it.
``dry_run``: the prompts are written to files instead of sent; nothing is proposed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tritune.llm import prompts
from tritune.model import failures, families
from tritune.model.settings import LLMSettings
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.secrets import scrub

NAME = families.LLM
MESSAGE_CHARS = 300  # seed 004 cuts a failure's message to this many characters
ATTEMPTS_SHOWN = 2  # seed 004 keeps the last two attempts in the conversation
# a worker failure kind (or a reply refusal) -> the class the model is told (seed 004's taxonomy)
CLASSES = {
    failures.COMPILE_ERROR: "compile error", failures.RUNTIME_FAULT: "runtime fault",
    failures.CRASH: "runtime fault (process crashed)", failures.TIMEOUT: "timeout",
    failures.WRONG_RESULT: "wrong result", failures.GHOST: "wrong result (the kernel never launched)",
    failures.ERROR: "runtime error", failures.UNSAFE: "unsafe code (refused before running)", "syntax": "syntax error",
    "no_code": "no ```python block in the reply", "missing_kernel": "the kernel is missing",
    "signature": "the kernel's parameters changed", "not_jit": "the kernel is not a @triton.jit function",
    "repeat": "the same code as an earlier attempt", "slower": "slower than the best so far",
}


@dataclasses.dataclass
class Cost:
    """Requests, tokens and seconds spent (``reused``: answered from the store, not the model)."""

    requests: int = 0
    reused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, usage: dict, seconds: float, reused: bool) -> None:
        self.requests += 1
        self.reused += int(reused)
        if not reused:  # a stored reply was paid for by the run that asked
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
            self.seconds += seconds

    def merge(self, other: "Cost") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def dollars(self, price: tuple[float, float] | None) -> float | None:
        if price is None:
            return None
        return (self.prompt_tokens * price[0] + self.completion_tokens * price[1]) / 1e6

    def to_json(self, price: tuple[float, float] | None = None) -> dict:
        body = dataclasses.asdict(self)
        body["dollars"] = self.dollars(price)
        return body

    def line(self, price: tuple[float, float] | None = None) -> str:
        """``3 requests (1 from the store), 5,120 tokens in / 1,840 out, 42 s[, $0.03]``."""
        text = (f"{self.requests} request(s)" + (f" ({self.reused} from the store)" if self.reused else "")
                + f", {self.prompt_tokens:,} tokens in / {self.completion_tokens:,} out, {self.seconds:.0f} s")
        dollars = self.dollars(price)
        return text + (f", ${dollars:.2f}" if dollars is not None else "")


class LLMSession:
    """What the kernels of one run share: the settings, the GPU's facts, the total cost, and
    whether the endpoint still answers (after one that cannot be used, no kernel asks again)."""

    def __init__(self, settings: LLMSettings, gpu: Target | None = None, log: Callable[[str], None] | None = None,
                 chat: Callable[[list[dict]], Any] | None = None) -> None:
        self.settings, self.gpu = settings, gpu
        self.log = log or (lambda message: None)
        self.total = Cost()
        self.broken: str | None = None  # why the endpoint is no longer asked
        self._chat = chat  # tests: a replacement for the HTTP client
        self._lock = threading.Lock()  # the lanes of ``optimize --workers`` add to one total

    def spend(self, usage: dict, seconds: float, reused: bool) -> None:
        with self._lock:
            self.total.add(usage, seconds, reused)

    def chat(self, messages: list[dict]) -> Any:
        """The model's ``Reply`` (``llm.client``); ``LLMError`` when the endpoint cannot be used."""
        if self._chat is not None:
            return self._chat(messages)
        from tritune.llm.client import ChatClient

        with ChatClient(self.settings.url, self.settings.model, max_tokens=self.settings.max_tokens,
                        read_timeout_s=self.settings.timeout_s, retries=self.settings.retries) as client:
            return client.chat(messages)

    def ask(self, messages: list[dict], *, failed: str) -> tuple[Any, dict, float] | None:
        """The model's ``Reply`` to ``messages``, its usage (tokens) and seconds, added to the run's
        total; None when the endpoint cannot be used: the session is broken from then on (no one
        asks again), and ``failed`` (with ``{error}``: the client's one line) is logged."""
        from tritune.llm.client import LLMError

        start = time.monotonic()
        try:
            reply = self.chat(messages)
        except LLMError as exc:
            self.broken = str(exc)
            self.log(failed.format(error=exc))
            return None
        usage = {"prompt_tokens": reply.usage.prompt_tokens, "completion_tokens": reply.usage.completion_tokens}
        seconds = time.monotonic() - start
        self.spend(usage, seconds, reused=False)
        return reply, usage, seconds

    def totals(self) -> dict:
        return {"model": self.settings.model, "cost": self.total.to_json(self.settings.price),
                "line": self.total.line(self.settings.price), "broken": self.broken}

    def proposer(self, store: Any, key: Any, run_id: int | None) -> "LLMProposer":
        return LLMProposer(self, store, key, run_id)


def totals_of(sessions: list[LLMSession]) -> dict:
    """The ``totals`` of a run's sessions together (a mixed host has one per kind of GPU, each
    telling its model about its own GPU)."""
    if len(sessions) == 1:
        return sessions[0].totals()
    total = Cost()
    for session in sessions:
        total.merge(session.total)
    first = sessions[0]
    return {"model": first.settings.model, "cost": total.to_json(first.settings.price),
            "line": total.line(first.settings.price), "broken": next((s.broken for s in sessions if s.broken), None)}


class LLMProposer:
    """Proposes one candidate a round for one kernel (module docstring)."""

    name = NAME

    def __init__(self, session: LLMSession, store: Any, key: Any, run_id: int | None) -> None:
        self.session, self.store, self.key, self.run_id = session, store, key, run_id
        self.cost = Cost()
        self.proposals = 0  # proposals asked for (rounds used)
        self.fixes = 0  # remediations of the current proposal
        self.attempts: list[dict] = []  # every reply: variant key or refusal, outcome, for prompts and report
        self._asked: dict[str, int] = {}  # variant key -> index in attempts

    # ------------------------------------------------------------------------------ proposing

    def propose_in(self, context: Any, limit: int) -> list[Variant]:
        settings = self.session.settings
        if limit <= 0 or self.session.broken or context.source is None:
            return []
        self._learn(context)
        while True:
            last = self.attempts[-1] if self.attempts else None
            failed = last is not None and last.get("failure") and last["failure"] != "slower"
            if failed and self.fixes < settings.fixes:
                self.fixes += 1
                role, messages = "fix", self._fix_messages(context, last)
            elif self.proposals < settings.rounds:
                self.proposals, self.fixes = self.proposals + 1, 0
                role, messages = "propose", self._propose_messages(context)
            else:
                return []
            reply = self._ask(role, messages)
            if reply is None:
                return []
            variant, refusal = self._candidate(context, reply)
            attempt = {"round": self.proposals, "fix": self.fixes, "role": role, "prompt_sha": reply["prompt_sha"],
                       "reply": reply["text"]}
            if refusal is not None:
                attempt.update(failure=refusal[0], message=refusal[1])
                self.attempts.append(attempt)
                self._outcome(attempt)
                continue  # refused before it ran: back to the model at once while fixes remain
            attempt.update(variant=variant.key(), name=variant.name)
            self._asked[variant.key()] = len(self.attempts)
            self.attempts.append(attempt)
            if any(t.variant.key() == variant.key() for t in context.trials):
                self._learn(context)  # a resumed run: the stored reply's candidate was evaluated before
                continue
            self._outcome(attempt)
            return [variant]

    def _learn(self, context: Any) -> None:
        """The outcome of the candidates this proposer made, from the loop's trials."""
        best = _best_ms(context)
        for trial in context.trials:
            index = self._asked.get(trial.variant.key())
            if index is None or "failure" in self.attempts[index] or "time_ms" in self.attempts[index]:
                continue
            attempt = self.attempts[index]
            if trial.ok:
                attempt["time_ms"] = trial.time_ms
                if best is not None and trial.time_ms is not None and trial.time_ms > best:
                    attempt.update(failure="slower", message=f"{trial.time_ms:.4f} ms against {best:.4f} ms")
            else:
                attempt.update(failure=trial.failure or failures.ERROR, message=(trial.message or "")[:MESSAGE_CHARS])
            self._outcome(attempt)

    def _candidate(self, context: Any, reply: dict) -> tuple[Variant | None, tuple[str, str] | None]:
        from tritune.allowlist import sandbox
        from tritune.llm.reply import ReplyError, check_kernel, first_python_block, splice

        kernel, source = context.spec.kernel, context.source
        try:
            code = first_python_block(reply["text"])
            sandbox.check(code, context=source)
            text = splice(source, kernel, code)
            check_kernel(source, text, kernel)
            sandbox.check_variant_source(source, text, kernel)  # as replay and apply will check it
        except sandbox.Unsafe as exc:
            return None, (failures.UNSAFE, str(exc)[:MESSAGE_CHARS])
        except ReplyError as exc:
            return None, (exc.kind, str(exc)[:MESSAGE_CHARS])
        variant = Variant(name=f"llm {self.proposals}.{self.fixes}", source=text,
                          rewrite={"rule": NAME, "exact": "tolerance",
                                   "params": {"model": self.session.settings.model, "template": prompts.version(),
                                              "prompt": reply["prompt_sha"][:16]}})
        if text == source or variant.key() in self._asked:
            return None, ("repeat", "this code was tried already" if text != source else "this is the original kernel")
        return variant, None

    # -------------------------------------------------------------------------------- asking

    def _ask(self, role: str, messages: list[dict]) -> dict | None:
        """The reply to ``messages``: from the store when this user stored it, else from the model
        (stored at once). None after writing the prompt in a dry run, or when the endpoint fails."""
        settings = self.session.settings
        prompt_sha = prompt_key(settings.model, messages)
        if settings.dry_run:
            path = write_prompt(settings.dry_run, f"{self.key.kernel}-{self.key.sha[:10]}-{role}-{prompt_sha[:10]}",
                                messages)
            self.session.log(f"{self.key.kernel}: llm dry run: prompt written to {path}")
            return None
        stored = self.store.llm_exchange(prompt_sha) if self.store is not None else None
        if stored is not None and stored.trusted:
            self._count(stored.usage, stored.seconds, reused=True)
            return {"prompt_sha": prompt_sha, "text": stored.reply}
        asked = self.session.ask(messages, failed="tritune optimize: llm: {error}; the run goes on without the model")
        if asked is None:
            return None
        reply, usage, seconds = asked
        self.cost.add(usage, seconds, reused=False)  # the session's total has it already
        if self.store is not None:
            self.store.add_llm_exchange(self.key, prompt_sha, role=role, model=settings.model,
                                        template=prompts.version(), request=messages, reply=reply.text,
                                        usage=usage, seconds=seconds, run_id=self.run_id)
        return {"prompt_sha": prompt_sha, "text": reply.text}

    def _count(self, usage: dict, seconds: float, reused: bool) -> None:
        self.cost.add(usage, seconds, reused)
        self.session.spend(usage, seconds, reused)

    def _outcome(self, attempt: dict) -> None:
        if self.store is not None and attempt.get("prompt_sha"):
            self.store.set_llm_outcome(attempt["prompt_sha"], {k: v for k, v in attempt.items()
                                                              if k not in ("reply", "prompt_sha")})

    # ------------------------------------------------------------------------------- prompts

    def _propose_messages(self, context: Any) -> list[dict]:
        from tritune.allowlist.sandbox import RULES

        spec = context.spec
        user = prompts.render(
            "propose", gpu=gpu_facts(self.session.gpu), file=Path(spec.source).name, source=context.source.rstrip(),
            kernel=spec.kernel, launch=launch_facts(spec), profile=profile_facts(context.profile),
            hints=_hints(context.hints), best=self._best(context), attempts=self._attempts_text())
        system = prompts.render("system", rules=RULES.rstrip())
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _fix_messages(self, context: Any, last: dict) -> list[dict]:
        """The conversation of the current proposal so far, then the failure (seed 004)."""
        messages = self._propose_messages_of_round(context)
        messages += [{"role": "assistant", "content": last["reply"]},
                     {"role": "user", "content": prompts.render(
                         "fix", kernel=context.spec.kernel, failure=CLASSES.get(last["failure"], last["failure"]),
                         message=(last.get("message") or "")[:MESSAGE_CHARS])}]
        return messages

    def _propose_messages_of_round(self, context: Any) -> list[dict]:
        """The proposal prompt this round began with (kept so a fix continues that conversation);
        the exchanges store has it under the round's first prompt."""
        first = next(a for a in self.attempts if a["round"] == self.proposals and a["role"] == "propose")
        stored = self.store.llm_exchange(first["prompt_sha"]) if self.store is not None else None
        if stored is not None:
            return [m for m in stored.request if m["role"] in ("system", "user")][:2]
        return self._propose_messages(context)

    def _best(self, context: Any) -> str:
        base = getattr(context, "baseline_ms", None)
        if not context.accepted or context.accepted.is_baseline:
            return f"the original kernel, {base:.4f} ms" if base else "the original kernel"
        times = [t.time_ms for t in context.trials if t.ok and t.variant.key() == context.accepted.key()]
        speed = f", {base / times[0]:.2f}x faster than the original ({base:.4f} ms)" if base and times else ""
        return f"`{context.accepted.describe()}`{speed}"

    def _attempts_text(self) -> str:
        shown = self.attempts[-ATTEMPTS_SHOWN:]
        if not shown:
            return "none yet"
        lines = []
        for attempt in shown:
            outcome = (f"{CLASSES.get(attempt['failure'], attempt['failure'])}: {attempt.get('message', '')}"
                       if attempt.get("failure") else
                       f"verified, {attempt['time_ms']:.4f} ms" if attempt.get("time_ms") else "not evaluated")
            code = _code_of(attempt["reply"])
            lines.append(f"- attempt {attempt['round']}.{attempt['fix']}: {outcome[:MESSAGE_CHARS]}\n"
                         f"```python\n{code}\n```")
        return "\n".join(lines)

    def summary(self, context: Any = None) -> dict:
        """For the kernel's result: rounds, replies, failure classes, remediation outcomes, cost;
        ``context``: the loop's last, so the last candidate's outcome is counted too."""
        if context is not None:
            self._learn(context)
        classes: dict[str, int] = {}
        for attempt in self.attempts:
            if attempt.get("failure"):
                classes[attempt["failure"]] = classes.get(attempt["failure"], 0) + 1
        fixed = sum(1 for a in self.attempts if a["role"] == "fix" and not a.get("failure"))
        return {"rounds": self.proposals, "replies": len(self.attempts), "failures": classes,
                "fixes": sum(1 for a in self.attempts if a["role"] == "fix"), "fixes_verified": fixed,
                "cost": self.cost.to_json(self.session.settings.price),
                "attempts": [{k: v for k, v in a.items() if k not in ("reply",)} for a in self.attempts]}


# ---------------------------------------------------------------------------------- keys

_MEASURED = re.compile(r"(?<![\w.])\d+\.\d+(?:[eE][-+]?\d+)?")


def prompt_key(model: str, messages: list[dict], template: str | None = None) -> str:
    """The key a reply is stored under: the model, the template version and the messages, with
    the decimal numbers outside code blocks (times, speedups, measured bandwidth, ncu metrics)
    masked, so that a resumed run, which measures its baseline anew, finds the replies it paid
    for. Code is kept whole: a different kernel is a different prompt."""
    def stable(text: str) -> str:
        parts = text.split("```")
        parts[::2] = [_MEASURED.sub("#", part) for part in parts[::2]]
        return "```".join(parts)

    body = json.dumps({"model": model, "template": template or prompts.version(),
                       "messages": [{**m, "content": stable(m["content"])} for m in messages]}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def write_prompt(folder: str | Path, stem: str, messages: list[dict]) -> Path:
    """A dry run's prompt: ``messages`` as Markdown in ``folder/stem.md`` (the folder made), with
    every secret scrubbed (``tritune.secrets``); returns the file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.md"
    path.write_text(scrub("\n\n".join(f"# {m['role']}\n\n{m['content']}" for m in messages)))
    return path


# ---------------------------------------------------------------------------------- facts

def gpu_facts(gpu: Target | None) -> str:
    names = (("gpu", "name"), ("capability", "compute capability"), ("sm_count", "SMs"), ("l2_bytes", "L2 bytes"),
             ("smem_per_sm", "shared memory per SM (bytes)"), ("regs_per_sm", "registers per SM"),
             ("copy_gbps", "copy bandwidth measured (GB/s)"))
    known = gpu.to_json() if gpu is not None else {}
    lines = [f"- {label}: {_value(known[k])}" for k, label in names if known.get(k) is not None]
    return "\n".join(lines) or "- unknown (no GPU: the candidates run under Triton's interpreter)"


def launch_facts(spec: Any) -> str:
    lines = [f"- grid: {spec.grid}", f"- launch options: {json.dumps(spec.options, sort_keys=True)}",
             f"- constexprs: {json.dumps(spec.constexprs, sort_keys=True, default=str)}", "- arguments:"]
    for arg in spec.args:
        if arg.kind == "tensor":
            role = "written" if arg.written else "read"
            lines.append(f"  - {arg.name}: {arg.dtype} tensor, shape {arg.shape}, strides {arg.stride} ({role})")
        else:
            lines.append(f"  - {arg.name}: {arg.kind} {arg.value!r}")
    return "\n".join(lines)


def profile_facts(profile: dict) -> str:
    facts = {k: v for k, v in (profile.get("facts") or {}).items() if v is not None}
    bottleneck = profile.get("bottleneck") or {}
    lines = [f"- source: {profile.get('source') or 'static analysis'}"]
    if bottleneck:
        lines.append(f"- bottleneck: {bottleneck.get('kind')}: {bottleneck.get('why', '')}")
    lines += [f"- {key}: {_value(value)}" for key, value in sorted(facts.items())]
    return "\n".join(lines)


def _hints(hints: tuple[dict, ...]) -> str:
    return "\n".join(f"- {h.get('text') or h.get('action')}" for h in hints) or "- none"


def _best_ms(context: Any) -> float | None:
    times = [t.time_ms for t in context.trials if t.ok and t.time_ms]
    base = getattr(context, "baseline_ms", None)
    return min(times + ([base] if base else []), default=None)


def _code_of(reply: str) -> str:
    from tritune.llm.reply import ReplyError, first_python_block

    try:
        return first_python_block(reply).strip()
    except ReplyError:
        return "(no code block)"


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def family(session: LLMSession, store: Any, key: Any, run_id: int | None) -> Any:
    """The loop's family: verified by tolerance (a model may reorder a sum), costly (the cheap
    families run first; ``loop.kernel`` gives it the rounds that remain)."""
    from tritune.search.family import Family

    return Family(NAME, session.proposer(store, key, run_id), lambda variant: "tolerance", reads_context=True,
                  costly=True)
