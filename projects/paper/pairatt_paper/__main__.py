"""Command line: python -m pairatt_paper COMMAND ... (see --help), run from projects/paper."""

from .cli import main

main()
