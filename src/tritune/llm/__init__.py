"""The LLM proposer (TritonForge's roles) behind any OpenAI-compatible endpoint.

``client``   chat completions over httpx: timeouts, retries on 429/5xx, the key as a Bearer token
``reply``    the reply's first python block, spliced into the captured source by function name
``sandbox``  the allowlist a reply (or a stored foreign source) must pass before anything of it runs
``grammar``  the sandbox's grammar; ``kernel_api`` the Triton API it lets kernels reach
``prompts``  the prompt templates, package files whose hash versions them
``family``   the proposer family: proposal, remediation, the exchanges stored for resume and audit
"""
