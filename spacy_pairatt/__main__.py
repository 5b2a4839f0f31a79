"""Command line: python -m spacy_pairatt COMMAND ... (see --help)."""

from .allocator import restart_with_jemalloc

restart_with_jemalloc()  # before anything allocates: flat memory in long runs (allocator.py)

from .cli import main  # noqa: E402

main()
