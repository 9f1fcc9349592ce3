"""Start-up code for captured programs: this folder goes first on their PYTHONPATH (see ``program``)."""
