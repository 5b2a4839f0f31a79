"""pairatt_bounded_memory: the opt-in pipe that bounds a parsing process's heap, and the callback that adds it.

The pipe counts the words its pipeline parses; its `ParsingHeapBound` (`integration/memory.py`) hands
the free heap back to the system when RSS has grown by a set amount. Nothing else in `components/`
imports the allocator control: a pipeline without this pipe leaves the allocator as it found it.
"""

from typing import Callable, Optional

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import registry

from ..integration.memory import WORDS_BETWEEN_CHECKS, ParsingHeapBound, new_parsing_heap_bound


class BoundedMemory:
    """The `pairatt_bounded_memory` pipe: counts the words its pipeline parses for its own `bound`."""

    def __init__(self, bound: ParsingHeapBound):
        self.bound = bound

    def __call__(self, doc: Doc) -> Doc:
        self.bound.parsed(len(doc))
        return doc


@Language.factory(
    "pairatt_bounded_memory",
    default_config={"words_between_checks": WORDS_BETWEEN_CHECKS, "min_growth_mb": None},
)
def make_bounded_memory(
    nlp: Language, name: str, words_between_checks: int, min_growth_mb: Optional[int]
) -> BoundedMemory:
    """A pipe with a `ParsingHeapBound` of its own settings, counting the words its pipeline parses; put
    it last. min_growth_mb: the RSS growth that hands the free heap back (None: the allocator's)."""
    if words_between_checks < 1 or (min_growth_mb is not None and min_growth_mb < 1):
        raise ValueError(
            f"[components.{name}] words_between_checks and min_growth_mb must be 1 or more "
            f"(got {words_between_checks} and {min_growth_mb})"
        )
    growth = None if min_growth_mb is None else min_growth_mb * 2**20
    return BoundedMemory(new_parsing_heap_bound(words_between_checks, growth))


@registry.callbacks("spacy-pairatt.bounded_memory.v1")
def make_bounded_memory_callback(
    words_between_checks: int = WORDS_BETWEEN_CHECKS, min_growth_mb: Optional[int] = None
) -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.bounded_memory.v1`, for `[nlp.after_pipeline_creation]`: adds the
    `pairatt_bounded_memory` pipe last, where the pipeline has none."""

    def add_bounded_memory(nlp: Language) -> Language:
        if "pairatt_bounded_memory" not in nlp.pipe_names:
            config = {"words_between_checks": words_between_checks, "min_growth_mb": min_growth_mb}
            nlp.add_pipe("pairatt_bounded_memory", last=True, config=config)
        return nlp

    return add_bounded_memory
