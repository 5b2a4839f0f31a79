"""Callbacks that a training config names: `spacy-pairatt.training_heap_bound.v1` bounds the training
process's heap (`integration/memory.py`, `limit_heap_fragmentation`)."""

from typing import Callable

from spacy.language import Language
from spacy.util import registry

from ..integration.memory import limit_heap_fragmentation


@registry.callbacks("spacy-pairatt.training_heap_bound.v1")
def make_training_heap_bound() -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.training_heap_bound.v1`, for `[initialize.before_init]`: fixes the
    thresholds (`limit_heap_fragmentation`) in the process that trains the config."""

    def bound_heap(nlp: Language) -> Language:
        limit_heap_fragmentation()
        return nlp

    return bound_heap
