"""``python -m tritune ...`` is ``tritune ...`` (for machines where the script is not on PATH)."""

from tritune.cli import main

main()
