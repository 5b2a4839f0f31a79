"""Command line: python -m spacy_pairatt COMMAND ... (see --help)."""

from .cli import main

main()
