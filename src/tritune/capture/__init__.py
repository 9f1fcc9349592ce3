"""Capture: every Triton launch of a program as a replayable ``LaunchSpec`` (see ``spec``)."""
