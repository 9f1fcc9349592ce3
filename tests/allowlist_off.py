"""Imported (a worker's ``preload``), it switches wall one off in that process: every check of
untrusted source accepts anything. For tests/worker/test_containment.py only, whose workers must show
what the jail stops alone, and that a payload acts when neither wall is there."""

from tritune.allowlist import sandbox


def _accept(*args: object, **kwargs: object) -> None:
    return None


sandbox.check = _accept
sandbox.check_variant_source = _accept
