"""The LLM proposer (TritonForge's roles) behind any OpenAI-compatible endpoint.

``client``   chat completions over httpx: timeouts, retries on 429/5xx, the key as a Bearer token
``reply``    the reply's first python block, spliced into the captured source by function name
A reply (or a stored foreign source) passes the kernel allowlist, ``tritune.allowlist``, before
anything of it runs, and runs only in jailed workers (``tritune.worker.jail``).
``prompts``  the prompt templates, package files whose hash versions them
``family``   the proposer family: proposal, remediation, the exchanges stored for resume and audit
"""
