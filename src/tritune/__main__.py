"""``python -m tritune ...`` is ``tritune ...`` (for machines where the script is not on PATH)."""

from tritune.cli import main

main(prog_name="tritune")  # messages name the command as the user knows it
