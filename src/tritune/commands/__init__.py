"""The ``tritune`` subcommands, one module each; ``tritune.cli`` registers them, nothing else imports them."""

# Commands that run ``-- COMMAND...``: option parsing stops at the command's first word, so its own
# options (``python -u x.py``) are its; an unknown option before it is an error ("no such option:
# --job"), not the start of the command (``ignore_unknown_options`` made it one, and the user then
# read "give exactly one of -- COMMAND, --launches ..." or "command not found: --job").
RUNS_A_COMMAND = {"allow_interspersed_args": False}
