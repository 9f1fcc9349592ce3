"""Issue 23's red team: model replies that try to get out of a candidate, against the two walls.

The corpus (``containment_payloads``) holds replies that would splice, build and verify if
nothing checked them, each reaching the machine by one route of the issue's and leaving evidence
there (a file, a connection on our listener, a process, a forged decision, a leaked secret).
These tests run them:

- the corpus is live: with both walls off, in an unjailed worker exactly as the loop builds a
  candidate, every payload's action happens (so every other test here can fail);
- wall one alone: the allowlist (``sandbox.check``) refuses every payload, unrun;
- wall two alone: the allowlist switched off, the jailed worker still stops every payload that
  acts on the machine;
- both walls, end to end: ``optimize`` with the LLM family against a scripted chat server, a
  sentinel LLM key and a sentinel signing key: nothing of any payload happens, the one honest
  reply becomes the only decision, the user's program runs it and nothing else, and neither key
  is in anything tritune wrote or sent (the key only in each request's Authorization header);
- both walls off end to end: a payload does leave its evidence (the harness sees effects).

CPU only, ``TRITON_INTERPRET=1``; as root, like CI.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from containment_payloads import BY_NAME, KERNEL, PAYLOADS, Payload, Traps, kernel, representatives
from test_loop import captured  # noqa: F401 - module-scoped fixture shared

from tritune.capture.spec import read_launches
from tritune.llm import sandbox
from tritune.llm.reply import check_kernel, first_python_block, splice
from tritune.replay import Variant
from tritune.worker import Worker, jail

VERIFY = "containment_jobs:unchecked_verify"
LAUNCH = "containment_jobs:unchecked_launch"
PROGRAM = "containment_jobs:program_launch"
AUDITED = "containment_jobs:audited"
PROGRAM_DIR = Path(__file__).resolve().parent / "programs"
PROGRAM_SOURCE = (PROGRAM_DIR / "loop_program.py").read_text()
LLM_KEY = "sk-redteam-SENTINEL-LLM-KEY-4b1d"  # TRITUNE_LLM_API_KEY in the end-to-end run
STORE_KEY = "feedc0de" * 8  # this module's signing key ($TRITUNE_HOME/store.key), as hex text


def candidate(captured: Path, text: str) -> dict:
    """The verify job's payload for a model's candidate, as ``Evaluator`` builds it."""
    spec = read_launches(captured)[0]
    variant = Variant(name="llm 1.0", source=text, rewrite={"rule": "llm", "exact": "tolerance", "params": {}})
    return {"spec": spec.to_json(), "root": str(captured), "variant": variant.to_json(), "mode": "tolerance",
            "input_sets": 1}


def spliced(payload_reply: str) -> str:
    """The candidate's text, through the loop's own reply handling (all but the allowlist)."""
    code = first_python_block(payload_reply)
    text = splice(PROGRAM_SOURCE, KERNEL, code)
    check_kernel(PROGRAM_SOURCE, text, KERNEL)
    return text


def outcome_texts(outcome) -> tuple[str, ...]:
    failure = outcome.failure
    texts = [json.dumps(outcome.value, default=str)] if outcome.ok else []
    if failure is not None:
        texts += [failure.message or "", failure.detail or ""]
    return tuple(texts)


def evidence_after(traps: Traps, payload: Payload, texts: tuple[str, ...], wait_s: float) -> list[str]:
    """The payload's evidence, looked for until ``wait_s`` has passed (a detached process may
    still be on its way when the call returns)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = traps.evidence(payload, texts)
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory) -> Path:
    """A TRITUNE_HOME of this module's, holding the sentinel signing key, for everything here
    (the workers started here inherit it)."""
    folder = tmp_path_factory.mktemp("home")
    folder.chmod(0o700)
    key = folder / "store.key"
    key.write_text(STORE_KEY + "\n")
    key.chmod(0o600)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITUNE_HOME", str(folder))
        yield folder


@pytest.fixture(scope="module")
def traps(tmp_path_factory, captured, home):
    root = tmp_path_factory.mktemp("redteam")
    with Traps(root, home=home, capture=captured, store=root / "forged.db") as found:
        yield found


@pytest.fixture
def paper_traps(tmp_path, home):
    """Traps to name in replies that are only read (no capture, nothing runs)."""
    with Traps(tmp_path, home=home, capture=tmp_path / "capture", store=tmp_path / "forged.db") as found:
        yield found


@pytest.fixture(scope="module")
def open_worker():
    """A worker without a jail, as every worker was before issue 23."""
    with Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton")) as worker:
        yield worker


# --------------------------------------------------------------------------- the corpus

def test_the_corpus_covers_every_family_of_the_issue():
    families = {p.family for p in PAYLOADS}
    assert len(PAYLOADS) >= 40
    assert {"alias", "subscript", "walrus", "frame", "dunder", "heuristics", "decorator", "default", "annotation",
            "fstring", "plain_call", "torch", "device", "process"} <= families
    actions = {p.action for p in PAYLOADS}
    assert {"file", "environ", "key", "key_socket", "socket", "setsid", "popen_session", "double_fork",
            "background", "forge", "pth"} <= actions


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p.name)
def test_every_payload_is_a_candidate_but_for_the_allowlist(payload, traps):
    """The reply handling (fences, splice, parameters, @triton.jit) takes every payload: only the
    allowlist stands in its way in the loop."""
    text = spliced(traps.reply(payload))
    assert f"def {KERNEL}(" in text


def run_payload(worker: Worker, payload: Payload, traps: Traps, captured: Path, job: str = LAUNCH):
    """The payload's candidate run in ``worker`` (``program`` payloads: launched as a program
    would); its outcome."""
    return worker.call(PROGRAM if payload.where == "program" else job,
                       candidate(captured, spliced(traps.reply(payload))), timeout_s=60)


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if p.process_level], ids=lambda p: p.name)
def test_with_both_walls_off_every_payload_acts(payload, traps, captured, open_worker):
    """The planted proof that the harness sees effects: in an open worker, with the allowlist
    off, each payload's action happens, by the route it was written for."""
    outcome = run_payload(open_worker, payload, traps, captured)
    found = evidence_after(traps, payload, outcome_texts(outcome), wait_s=3.0)
    assert found, f"{payload.name} left no evidence: {outcome.failure or outcome.value}"


# ------------------------------------------------------------------------ wall one alone

@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p.name)
def test_the_allowlist_alone_refuses_every_payload(payload, paper_traps):
    """Refused as a reply (``check``, before the splice) and as a stored candidate's whole text
    (``check_variant_source``, where stored source is imported: replay, apply, store import)."""
    reply = paper_traps.reply(payload)
    with pytest.raises(sandbox.Unsafe):
        sandbox.check(first_python_block(reply), PROGRAM_SOURCE)
    with pytest.raises(sandbox.Unsafe):
        sandbox.check_variant_source(PROGRAM_SOURCE, spliced(reply), KERNEL)


def test_the_allowlist_takes_the_honest_reply_the_payloads_are_built_on(paper_traps):
    """The same kernel without an attack passes both checks: the refusals above are the attacks'."""
    honest = kernel()
    sandbox.check(honest, PROGRAM_SOURCE)
    sandbox.check_variant_source(PROGRAM_SOURCE, splice(PROGRAM_SOURCE, KERNEL, honest), KERNEL)


@pytest.mark.xfail(strict=True, reason="F2: needs_check trusts the rule a stored variant names")
def test_a_variant_that_claims_a_tritune_rule_is_still_checked(paper_traps):
    """A shared store decides what a variant says of itself: a payload's text that names one of
    tritune's rules must be checked where it is imported all the same."""
    from tritune.rewrites import RULES

    text = spliced(paper_traps.reply(BY_NAME["forge_signed_decision"]))
    for rule in RULES:
        claims = Variant(name=rule, source=text, rewrite={"rule": rule, "exact": "exact", "params": {}})
        assert sandbox.needs_check(claims), rule


# ------------------------------------------------------------------------- wall two alone

JAIL_SET = [p for p in PAYLOADS if p.family == "process"] + [
    BY_NAME[name] for name in ("alias_knobs_os_system", "walrus_module_level", "heuristics_lambda_body",
                               "autotune_pre_hook", "helper_default_call", "dunder_import_module_level",
                               "generator_function_frame", "lambda_decorator", "torch_through_importlib")]


@pytest.fixture(scope="module")
def jailed_worker(captured, traps):
    """A worker jailed as the loop jails its workers: the capture and the program's folder
    readable, the fake site-packages too (as the real one is), nothing else of ours."""
    policy = jail.policy(capture_dir=captured, program_dir=str(PROGRAM_DIR), extra_read=(traps.site,))
    with Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton"), jail=policy) as worker:
        yield worker


def known(payload: Payload, finding: str) -> object:
    """``payload`` as a parameter expected to fail (strictly: a fix makes the test fail until
    the mark goes) for ``finding`` (FINDINGS-redteam.md)."""
    return pytest.param(payload, marks=pytest.mark.xfail(strict=True, reason=finding), id=payload.name)


JAIL_KNOWN = {"evidence_in_dev_shm": "F1: the jail grants /dev/shm read-write; a file left there outlives the run"}


@pytest.mark.parametrize("payload", [known(p, JAIL_KNOWN[p.name]) if p.name in JAIL_KNOWN else p for p in JAIL_SET],
                         ids=lambda p: p.name)
def test_the_jail_alone_stops_every_process_level_payload(payload, traps, captured, jailed_worker):
    """The allowlist off (in the worker too), the candidate built and verified as the loop does
    it in a jailed worker: the payload runs, tries, and leaves nothing."""
    job = "program_launch" if payload.where == "program" else "unchecked_verify"
    body = {**candidate(captured, spliced(traps.reply(payload))), "job": job, "watch": traps.watched()}
    outcome = jailed_worker.call(AUDITED, body, timeout_s=60)
    assert outcome.ok, outcome.failure
    events, error = outcome.value["events"], outcome.value["error"]
    assert traps.attempts(payload, [*events, error or ""]), f"{payload.name} never tried its action: {error}; {events}"
    time.sleep(0.2)  # a process on its way would be found
    texts = (error or "", *events)
    assert traps.evidence(payload, texts) == [], f"{payload.name} got through the jail: {error}"
