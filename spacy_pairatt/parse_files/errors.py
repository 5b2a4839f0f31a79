"""What the parse command reports to the user without a traceback, and the checks of its arguments."""

import sys
from typing import Optional, Tuple

# The largest count Python's islice and deque take (a C ssize_t): a batch size beyond it would end
# in an OverflowError deep in spaCy.
MAX_COUNT = sys.maxsize


class ParseCommandError(Exception):
    """A problem with the model, the input or the output, reported to the user without a traceback.

    n_docs: when the error stopped a run, the documents parsed before it.
    """

    n_docs: Optional[int] = None


def flat_message(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def check_choice(what: str, value, choices: Tuple) -> None:
    if value not in choices:
        raise ParseCommandError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def check_counts(batch_size: int, n_process: int = 1) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ParseCommandError(f"the batch size must be at least 1, got {batch_size!r}")
    if batch_size > MAX_COUNT:
        raise ParseCommandError(f"the batch size must be at most {MAX_COUNT}, got {batch_size}")
    if not isinstance(n_process, int) or not (n_process >= 1 or n_process == -1):
        raise ParseCommandError(f"the number of processes must be at least 1 (or -1: one per CPU), got {n_process!r}")
