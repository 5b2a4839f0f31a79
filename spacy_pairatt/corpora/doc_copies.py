"""Copies of a training Doc with tokens dropped or their text and spacing changed, every annotation
carried along: what the raw-text noise makes of a gold sentence, and what a paragraph of the
treebank becomes when its last space goes."""

from typing import List, Optional, Sequence

import numpy as np
from spacy.tokens import Doc
from spacy.vocab import Vocab


def edited_copy(
    doc: Doc, words: Sequence[str], spaces: Sequence[bool], keep: Sequence[bool], vocab: Optional[Vocab] = None
) -> Doc:
    """A new Doc of `doc`'s tokens where keep[i] is true, each with words[i] as its text and
    spaces[i] as its trailing space. The tags, POS, morphology, lemmas and sentence starts `doc`
    has are copied; heads move with their words. Raises ValueError if a dropped token heads a kept one."""
    kept = np.flatnonzero(np.asarray(keep, dtype=bool))
    new_index = np.full(len(doc), -1, dtype="int64")
    new_index[kept] = np.arange(len(kept))
    tokens = [doc[int(i)] for i in kept]
    heads: Optional[List[int]] = None
    if doc.has_annotation("DEP"):
        heads = [int(head) for head in new_index[[token.head.i for token in tokens]]]
        orphans = [token.i for token, head in zip(tokens, heads) if head < 0]
        if orphans:
            raise ValueError(f"tokens {orphans} would lose their head: a dropped token heads them")
    return Doc(
        vocab or doc.vocab,
        words=[words[i] for i in kept],
        spaces=[bool(spaces[i]) for i in kept],
        tags=[token.tag_ for token in tokens] if doc.has_annotation("TAG") else None,
        pos=[token.pos_ for token in tokens] if doc.has_annotation("POS") else None,
        morphs=[str(token.morph) for token in tokens] if doc.has_annotation("MORPH") else None,
        lemmas=[token.lemma_ for token in tokens] if doc.has_annotation("LEMMA") else None,
        heads=heads,
        deps=[token.dep_ for token in tokens] if heads is not None else None,
        sent_starts=[bool(token.is_sent_start) for token in tokens] if doc.has_annotation("SENT_START") else None,
    )
