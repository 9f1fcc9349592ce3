"""A parent process for tests/test_worker_jail.py: started with a sentinel in its environment (what
``/proc/PID/environ`` shows is the environment a process started with, so the test process itself
cannot plant one there), it runs jobs against itself in a worker and prints what came back.

    python jail_parent.py MODE JOB... ->  one JSON object: job -> {"ok", "value" or "error"}

MODE ``jailed``: ``protect_parent()`` and a jailed worker, as tritune's commands run them;
``policy=landlock|caps|seccomp``: jailed with only that mechanism off; ``open``: neither (the
control: proves that the jobs reach the parent when nothing stops them).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from tritune.worker import Worker, jail


def main() -> None:
    mode, jobs = sys.argv[1], sys.argv[2:]
    policy = None
    if mode != "open":
        jail.protect_parent()
        policy = jail.policy()
        if mode.startswith("policy="):
            policy = dataclasses.replace(policy, **{mode.split("=", 1)[1]: False})
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
