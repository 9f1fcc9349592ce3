"""The report's LLM section: per kernel the model's rounds, replies, failure classes, remediation
outcomes and cost, with every attempt (the replies themselves are in the store's exchanges)."""

from __future__ import annotations

from typing import Any

from tritune.model.results import RunResults


def llm_blocks(results: RunResults) -> list[Any]:
    from tritune.report.blocks import Heading, Items, Para, Table

    if results.llm is None:
        return []
    blocks: list[Any] = [Heading(2, f"LLM proposer ({results.llm.get('model')})"),
                         Para(f"Total: {results.llm.get('line')}.")]
    if results.llm.get("broken"):
        blocks.append(Para(f"The endpoint stopped being asked: {results.llm['broken']}", warning=True))
    for kernel in results.kernels:
        llm = kernel.llm
        if not llm:
            continue
        cost = llm.get("cost") or {}
        failures = ", ".join(f"{n} {kind}" for kind, n in sorted((llm.get("failures") or {}).items())) or "none"
        dollars = cost.get("dollars")
        blocks += [Heading(3, kernel.id or kernel.kernel), Items([
            f"rounds: {llm.get('rounds', 0)}, replies: {llm.get('replies', 0)}",
            f"failure classes: {failures}",
            f"remediations: {llm.get('fixes', 0)}, of which built and verified: {llm.get('fixes_verified', 0)}",
            f"cost: {cost.get('requests', 0)} request(s) ({cost.get('reused', 0)} from the store), "
            f"{cost.get('prompt_tokens', 0):,} tokens in / {cost.get('completion_tokens', 0):,} out, "
            f"{cost.get('seconds', 0.0):.0f} s" + (f", ${dollars:.2f}" if dollars is not None else ""),
        ])]
        rows = [[f"{a.get('round')}.{a.get('fix')}", a.get("role", ""), a.get("name") or "-",
                 a.get("failure") or ("verified" if a.get("time_ms") else "not evaluated"),
                 f"{a['time_ms']:.4f}" if a.get("time_ms") else "-", (a.get("message") or "")[:160]]
                for a in llm.get("attempts") or []]
        if rows:
            blocks.append(Table(["attempt", "role", "candidate", "outcome", "ms", "message"], rows))
    return blocks
