"""How sure `pairatt_parser` is of each arc and sentence, on the Doc.

The parser computes tree marginals (`core/marginals.py`) for each sentence it decodes and stores
them in one Doc extension, `Doc._.pairatt_confidence` (a dict of arrays, so it travels with
`Doc.to_bytes`, a `DocBin` with user data and `nlp.pipe(n_process=...)`). These read it:

* `Token._.head_prob`: the marginal probability of the arc MST chose (for the root: of being the
  root), under the distribution over single-root trees of the sentence.
* `Token._.dep_prob`: the probability of the chosen label given that arc.
* `Token._.head_candidates`: the k most probable heads as (token index in the Doc, probability),
  most probable first; the token's own index stands for the root, as `Token.head` has it.
* `Span._.parse_confidence` (a sentence): the probability of the whole decoded labelled tree,
  P(tree) times the product of its labels' `dep_prob`: how likely the sentence is parsed with no
  error at all. It falls with length, as the chance of an error does.
* `Span._.arc_marginals` (a sentence, with `confidence = "matrix"`): the (n, n) marginals in
  `tree_marginals`' layout (row the dependent, column the head, the diagonal the root).

Each is None for tokens and spans the parser did not annotate, for whitespace tokens (no word of
the tree: each hangs from a neighbouring word, outside the distribution), and for a Doc whose
tokens changed after parsing (e.g. retokenized: the store keeps a fingerprint of every token's
text, start and whitespace, and a Doc that no longer matches it gets None, even where a merge and a
split left its length as it was).
"""

import hashlib
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from spacy.attrs import IDX, ORTH, SPACY
from spacy.tokens import Doc, Span, Token

CONFIDENCE_LEVELS = ("none", "arcs", "matrix")
STORE = "pairatt_confidence"


def register_confidence_extensions() -> None:
    """Register the Doc store and the Token / Span getters once per process."""
    if not Doc.has_extension(STORE):
        Doc.set_extension(STORE, default=None)
    getters = {
        Token: {
            "head_prob": token_head_prob,
            "dep_prob": token_dep_prob,
            "head_candidates": token_head_candidates,
        },
        Span: {"parse_confidence": span_parse_confidence, "arc_marginals": span_arc_marginals},
    }
    for owner, extensions in getters.items():
        for name, getter in extensions.items():
            if not owner.has_extension(name):
                owner.set_extension(name, getter=getter)


def token_fingerprint(doc: Doc) -> str:
    """What a store lines up with: every token's text (its hash), start and trailing whitespace."""
    return hashlib.blake2b(doc.to_array([ORTH, IDX, SPACY]).tobytes(), digest_size=16).hexdigest()


def _store(doc: Doc) -> Optional[Dict]:
    store = doc._.get(STORE)
    if store is None or len(store["head_prob"]) != len(doc) or store.get("tokens") != token_fingerprint(doc):
        return None
    return store


def _value(array: np.ndarray, index: int) -> Optional[float]:
    value = float(array[index])
    return None if np.isnan(value) else value


def _arc_store(token: Token) -> Optional[Dict]:
    """The store where it describes the token's arc as it is now (its head not moved since parsing)."""
    store = _store(token.doc)
    return store if store is not None and store["heads"][token.i] == token.head.i else None


def token_head_prob(token: Token) -> Optional[float]:
    store = _arc_store(token)
    return None if store is None else _value(store["head_prob"], token.i)


def token_dep_prob(token: Token) -> Optional[float]:
    store = _arc_store(token)
    return None if store is None else _value(store["dep_prob"], token.i)


def token_head_candidates(token: Token) -> Optional[List[Tuple[int, float]]]:
    store = _arc_store(token)
    if store is None or np.isnan(store["head_prob"][token.i]):
        return None
    heads, probs = store["candidates"][token.i], store["candidate_probs"][token.i]
    return [(int(head), float(prob)) for head, prob in zip(heads, probs) if head >= 0]


def _sentence_index(span: Span) -> Optional[Tuple[Dict, int]]:
    store = _store(span.doc)
    if store is None:
        return None
    for index, (start, end) in enumerate(zip(store["sent_starts"], store["sent_ends"])):
        if start == span.start and end == span.end:
            return store, index
    return None


def span_parse_confidence(span: Span) -> Optional[float]:
    found = _sentence_index(span)
    return None if found is None else _value(np.asarray(found[0]["tree_prob"], dtype=float), found[1])


def span_arc_marginals(span: Span) -> Optional[np.ndarray]:
    found = _sentence_index(span)
    if found is None or not found[0]["matrices"]:
        return None
    return found[0]["matrices"][found[1]]


class BatchConfidence:
    """The confidence stores of a batch of Docs, filled a chunk of sentences at a time.

    The Docs' tokens are laid end to end (`offsets`, the batch position of each Doc's first token),
    so that a chunk's words, whatever their Docs, are written by a few array assignments; `store`
    then cuts one Doc's store out (NaN / -1 where nothing was parsed), sentences in text order.
    """

    def __init__(self, offsets: np.ndarray, n_candidates: int):
        n_tokens = int(offsets[-1])
        self.offsets = offsets
        self.heads = np.full(n_tokens, -1, dtype="int32")
        self.head_prob = np.full(n_tokens, np.nan, dtype="float32")
        self.dep_prob = np.full(n_tokens, np.nan, dtype="float32")
        self.candidates = np.full((n_tokens, n_candidates), -1, dtype="int32")
        self.candidate_probs = np.zeros((n_tokens, n_candidates), dtype="float32")
        # Doc index -> its sentences so far: (start, end, tree_prob, (n, n) marginals or None)
        self.sentences: Dict[int, List[Tuple[int, int, float, Optional[np.ndarray]]]] = {}

    def fill(self, words: "ChunkWords", arrays: Dict[str, np.ndarray], matrices: Optional[List[np.ndarray]]) -> None:
        """Write a chunk's words: `arrays` is `decoded_tree_confidence`'s output for the chunk;
        matrices, one (n, n) per row, or None. Heads and candidates are kept as Doc token indices
        (unit 0, the root, becomes the word's own index), so that a head moved after parsing gets
        no confidence."""
        row, unit, token = words.row, words.unit, words.token
        doc_first = self.offsets[words.doc_index]  # per sentence: the batch position of its Doc
        starts = words.first - doc_first  # per sentence: its first word in its Doc
        own = token - doc_first[row]
        self.heads[token] = words.head - doc_first[row]
        self.head_prob[token] = arrays["head_prob"][row, unit]
        self.dep_prob[token] = arrays["dep_prob"][row, unit]
        k = min(self.candidates.shape[1], arrays["candidate_units"].shape[2])
        units = arrays["candidate_units"][row, unit, :k]
        in_doc = np.where(units == 0, own[:, None], starts[row, None] + units - 1)
        self.candidates[token, :k] = np.where(units < 0, -1, in_doc)
        self.candidate_probs[token, :k] = arrays["candidate_probs"][row, unit, :k]
        sentences = zip(starts.tolist(), (starts + words.n_words).tolist(), arrays["tree_prob"].tolist())
        for doc_index, (start, end, tree_prob), matrix in zip(
            words.doc_index.tolist(), sentences, matrices or [None] * len(starts)
        ):
            self.sentences.setdefault(doc_index, []).append((start, end, tree_prob, matrix))

    def store(self, doc_index: int, doc: Doc) -> Dict[str, object]:
        """Doc `doc_index`'s store (`Doc._.pairatt_confidence`): its own copies of the arrays."""
        tokens = slice(int(self.offsets[doc_index]), int(self.offsets[doc_index + 1]))
        sentences = sorted(self.sentences.get(doc_index, []), key=lambda sentence: sentence[0])
        return {
            "tokens": token_fingerprint(doc),
            "heads": self.heads[tokens].copy(),
            "head_prob": self.head_prob[tokens].copy(),
            "dep_prob": self.dep_prob[tokens].copy(),
            "candidates": self.candidates[tokens].copy(),
            "candidate_probs": self.candidate_probs[tokens].copy(),
            "sent_starts": [start for start, _, _, _ in sentences],
            "sent_ends": [end for _, end, _, _ in sentences],
            "tree_prob": [tree_prob for _, _, tree_prob, _ in sentences],
            "matrices": [matrix for *_, matrix in sentences if matrix is not None],
        }


@dataclass
class ChunkWords:
    """Where a chunk's words are, as indices into the batch's Docs laid end to end.

    Per sentence row (B,): doc_index, first (the batch position of its first word), n_words. Per word
    (W,): row, unit (1..n_words), token (its batch position), head (its decoded head's; the root's
    is itself, spaCy's convention)."""

    doc_index: np.ndarray
    first: np.ndarray
    n_words: np.ndarray
    row: np.ndarray
    unit: np.ndarray
    token: np.ndarray
    head: np.ndarray


@dataclass
class SentenceConfidence:
    """One sentence's confidence as the parser computed it, words only (see the module docstring):
    head_prob, dep_prob (n,); candidate_units, candidate_probs (n, k) with unit 0 the root;
    tree_prob; matrix (n, n) or None."""

    head_prob: np.ndarray
    dep_prob: np.ndarray
    candidate_units: np.ndarray
    candidate_probs: np.ndarray
    tree_prob: float
    matrix: Optional[np.ndarray]


def least_confident_sentences(docs: Sequence[Doc]) -> List[Tuple[float, int, Span]]:
    """(parse_confidence, Doc index, sentence) of every parsed sentence, least confident first."""
    found = [
        (confidence, doc_index, sent)
        for doc_index, doc in enumerate(docs)
        for sent in (doc.sents if doc.has_annotation("SENT_START") or doc.has_annotation("DEP") else [doc[:]])
        if (confidence := sent._.parse_confidence) is not None
    ]
    return sorted(found, key=lambda item: (item[0], item[1], item[2].start))


def render_parse(
    docs, *, probabilities: bool = True, shade: bool = True, page: bool = False, jupyter=None, options=None
):
    """displaCy's dependency view of parsed Docs (or Spans) with the parser's confidence: each arc's
    label followed by its `head_prob` (probabilities) and the arc drawn the fainter the less sure
    the parser is of it (shade: stroke opacity = head_prob, at least 0.15). Returns the markup, as
    `displacy.render` does."""
    from spacy import displacy

    docs = [docs] if not isinstance(docs, (list, tuple)) else docs
    parses = [_manual_parse(doc, probabilities) for doc in docs]
    markup = displacy.render(parses, style="dep", manual=True, page=page, jupyter=False, options=options or {})
    if shade:
        opacity = iter([arc["opacity"] for parse in parses for arc in parse["arcs"]])
        markup = ARC_PATH.sub(lambda match: f'{match.group(0)} stroke-opacity="{next(opacity):.2f}"', markup)
    if jupyter:
        from IPython.display import HTML, display

        display(HTML(markup))
        return None
    return markup


ARC_PATH = re.compile(r'<path class="displacy-arc" id="arrow-[^"]+"')


def _manual_parse(doc, probabilities: bool) -> Dict:
    """displaCy's manual dependency format for a Doc or Span, labels and opacities from head_prob."""
    span = doc[:] if isinstance(doc, Doc) else doc
    words = [{"text": token.text, "tag": token.tag_ or token.pos_} for token in span]
    arcs = []
    for token in span:
        if token.head.i == token.i or not span.start <= token.head.i < span.end:
            continue
        prob = token._.head_prob
        label = token.dep_ if prob is None or not probabilities else f"{token.dep_} {prob:.2f}"
        start, end = sorted((token.i - span.start, token.head.i - span.start))
        direction = "left" if token.i < token.head.i else "right"
        arcs.append({"start": start, "end": end, "label": label, "dir": direction, "opacity": max(prob or 1.0, 0.15)})
    return {"words": words, "arcs": arcs}
