"""Training noise for the segmenter: gold sentences made to look the way careless raw text does.

Edited text drops a sentence's full stop, starts a sentence in lower case, puts a space before a
full stop or none after it, and wraps its lines anywhere. A segmenter that trains only on the
treebank's tidy sentences leans on exactly those cues and misses boundaries where they are gone;
Stanza's tokenizer trains with the same kinds of noise. Each Example is kept as it is, and with
probability `level` a noised copy follows it, its gold sentence starts moved with the words.
"""

import random
from typing import Callable, Iterator, List

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..corpora.doc_copies import edited_copy
from ..integration.validation import check_settings

FINAL_PUNCTUATION = frozenset({".", "!", "?"})


@registry.augmenters("spacy-pairatt.raw_text_noise.v1")
def make_raw_text_noise(
    level: float = 0.5,
    drop_final: float = 0.3,
    lowercase_start: float = 0.3,
    space_change: float = 0.2,
    line_break: float = 0.05,
) -> Callable[[Language, Example], Iterator[Example]]:
    """Registered as `spacy-pairatt.raw_text_noise.v1`: the augmenter of the segmenter's corpus.

    level: the share of Examples followed by a noised copy; in that copy each sentence but the
    last loses its final . ! or ? with probability drop_final, each sentence start is lower-cased
    with probability lowercase_start, and the space before a final punctuation mark, or after it,
    is flipped with probability space_change, and each space between two words becomes a line
    break with probability line_break (a wrapped line: a line break alone is no boundary).
    """
    check_settings(
        "spacy-pairatt.raw_text_noise.v1",
        level=level,
        drop_final=drop_final,
        lowercase_start=lowercase_start,
        space_change=space_change,
        line_break=line_break,
    )

    def augment(nlp: Language, example: Example) -> Iterator[Example]:
        yield example
        if random.random() < level:
            reference = noised(example.reference, random, drop_final, lowercase_start, space_change, line_break)
            predicted = Doc(
                nlp.vocab, words=[token.text for token in reference], spaces=[bool(t.whitespace_) for t in reference]
            )
            yield Example(predicted, reference)

    return augment


def noised(
    doc: Doc, rng, drop_final: float, lowercase_start: float, space_change: float, line_break: float = 0.0
) -> Doc:
    """A copy of `doc` with the noise applied, its annotations carried along (`edited_copy`): a
    final mark that heads a word is kept. rng: the `random` module or a random.Random. Raises
    ValueError for line breaks in a parsed Doc, whose trees have no gold for a whitespace token."""
    if line_break and doc.has_annotation("DEP"):
        raise ValueError(
            "raw_text_noise: line_break adds whitespace tokens, which a parsed Doc has no gold head for; "
            "set line_break = 0 for a corpus with trees"
        )
    words = [token.text for token in doc]
    spaces = [bool(token.whitespace_) for token in doc]
    keep = [True] * len(doc)
    sentences = list(doc.sents)
    for number, sentence in enumerate(sentences):
        first = sentence.start
        if rng.random() < lowercase_start and words[first][:1].isupper() and words[first][1:2].islower():
            words[first] = words[first][:1].lower() + words[first][1:]
        last = last_word(doc, sentence.start, sentence.end)
        if last is None or words[last] not in FINAL_PUNCTUATION or last == first:
            continue
        if number < len(sentences) - 1 and rng.random() < drop_final and not doc[last].n_lefts + doc[last].n_rights:
            keep[last] = False
            spaces[last - 1] = spaces[last - 1] or spaces[last]
        elif rng.random() < space_change:
            if rng.random() < 0.5:
                spaces[last - 1] = not spaces[last - 1]
            elif number < len(sentences) - 1:
                spaces[last] = not spaces[last]
    copy = edited_copy(doc, words, spaces, keep)
    return wrapped_lines(copy, rng, line_break) if line_break else copy


def wrapped_lines(doc: Doc, rng, line_break: float) -> Doc:
    """`doc` (words, spaces and sentence starts) with each space between two words made a line
    break with probability line_break."""
    words: List[str] = []
    spaces: List[bool] = []
    starts: List[bool] = []
    for token in doc:
        wrapped = bool(token.whitespace_) and token.i + 1 < len(doc) and rng.random() < line_break
        words.append(token.text)
        spaces.append(bool(token.whitespace_) and not wrapped)
        starts.append(bool(token.is_sent_start))
        if wrapped:
            words.append("\n")
            spaces.append(False)
            starts.append(False)
    return Doc(doc.vocab, words=words, spaces=spaces, sent_starts=starts)


def last_word(doc: Doc, start: int, end: int):
    """The index of the sentence's last non-whitespace token, or None."""
    for i in range(end - 1, start - 1, -1):
        if not doc[i].is_space:
            return i
    return None
