"""The ``tritune`` subcommands, one module each; ``tritune.cli`` registers them. Nothing imports these."""
