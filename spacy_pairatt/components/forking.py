"""Make `nlp.pipe(n_process=...)` safe with torch: forked workers run torch on one thread.

On Linux spaCy forks its workers. Once torch has run (spacy.load runs it), the parent holds an
OpenMP thread pool that a forked child cannot use: its first multi-threaded op waits forever
(explosion/spaCy#6662, #4667). A child that sets one thread never enters that pool; the workers
together still use every core.
"""

import os

import torch

_registered = False


def single_threaded_torch_after_fork() -> None:
    """Register, once per process, a fork hook that sets torch to one thread in the child."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))
    _registered = True
