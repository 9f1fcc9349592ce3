"""A parent process for tests/worker/test_worker_jail.py: started with a sentinel in its environment (what
``/proc/PID/environ`` shows is the environment a process started with, so the test process itself
cannot plant one there), it runs jobs against itself in a worker and prints what came back.

    python jail_parent.py MODE JOB... ->  one JSON object: job -> {"ok", "value" or "error"}

MODE: words separated by commas: ``jail`` (a jailed worker), ``protect`` (``protect_parent()``
first), as tritune's commands run them; ``off=landlock|caps|seccomp`` (that mechanism of the jail
off); ``nocaps`` (this parent drops its own capabilities first: a root worker without
capabilities is then refused only by what is left, as a worker of a user other than root is).
``open`` (none of them) is the control: the jobs reach the parent when nothing stops them.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from tritune.worker import Worker, jail


def main() -> None:
    words, jobs = sys.argv[1].split(","), sys.argv[2:]
    policy = jail.policy() if "jail" in words else None
    for word in words:
        if word.startswith("off="):
            policy = dataclasses.replace(policy, **{word[4:]: False})
    if "nocaps" in words:
        jail.drop_capabilities()
    if "protect" in words:
        jail.protect_parent()
    found = {}
    with Worker(30, jail=policy) as worker:
        for job in jobs:
            name, _, payload = job.partition("=")
            outcome = worker.call(f"jail_jobs:{name}", payload or None)
            found[job] = ({"ok": True, "value": repr(outcome.value)} if outcome.ok
                          else {"ok": False, "error": outcome.failure.message})
    print(json.dumps(found))


if __name__ == "__main__":
    main()
