"""The LLM proposer's prompt templates: package files, versioned by their hash.

``system.md`` (the rules a reply must follow), ``propose.md`` (a new proposal: the GPU, the kernel's
source, the captured launch, the profile, tritune's hints, the best variant so far and the last two
attempts) and ``fix.md`` (remediation: the failure class and its message cut to 300 characters);
for ``tritune generate`` (``generate.llm``), ``generate.md`` (the spec, its shapes, the GPU, what the
module must define, the tolerance and the rules) and ``generate_fix.md`` (an attempt's failure class,
its message cut to 300 characters, and a line of guidance for some classes).
They are ``string.Template`` texts (``$name``), so the braces of code need no escaping.
``version(names)`` is the hash of a set of them (by default the proposer's, ``PROPOSER``): a change
of prompt shows in every stored exchange, and a change of ``generate``'s prompts leaves the
proposer's stored replies usable.
"""

from __future__ import annotations

import functools
import hashlib
import string
from importlib import resources

PROPOSER = ("system", "propose", "fix")
GENERATE = ("generate", "generate_fix")
NAMES = PROPOSER + GENERATE


@functools.cache
def template(name: str) -> string.Template:
    return string.Template(resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


@functools.cache
def version(names: tuple[str, ...] = PROPOSER) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(template(name).template.encode())
    return digest.hexdigest()[:12]


def render(name: str, **fields: object) -> str:
    """The template with every ``$field`` filled (a missing one is a KeyError: a bug here)."""
    return template(name).substitute({key: str(value) for key, value in fields.items()}).strip() + "\n"
