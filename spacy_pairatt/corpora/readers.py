"""Corpus readers.

- `spacy-pairatt.GoldSpansCorpus.v1`, for the relation component: relation extraction on SemEval
  and DocRED is evaluated with the entities given, so the Doc the pipeline sees must carry the
  reference's tokens, sentence starts and candidate spans (not its relations). spaCy's own
  `spacy.Corpus.v1` gives the pipeline only the raw text.
- `spacy-pairatt.SentenceGroupsCorpus.v1`, for sentence segmentation: multi-sentence Docs from a
  corpus of one sentence per Doc, in more than one grouping.
"""

from pathlib import Path
from typing import Callable, Iterator, List, Sequence, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example

from ..core.doc_relations import ENTS, register_relations_extension


def make_gold_spans_corpus(
    path: Union[str, Path], spans_key: str = ENTS, limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """Registered as `spacy-pairatt.GoldSpansCorpus.v1`: Examples from a .spacy file (with user data).

    limit: read at most this many Docs (0: all).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"GoldSpansCorpus: no such file {str(path)!r}")
    register_relations_extension()

    def read(nlp: Language) -> Iterator[Example]:
        docs = DocBin(store_user_data=True).from_disk(path).get_docs(nlp.vocab)
        for index, reference in enumerate(docs):
            if limit and index >= limit:
                break
            yield Example(with_candidate_spans(reference, spans_key), reference)

    return read


def with_candidate_spans(reference: Doc, spans_key: str) -> Doc:
    """A new Doc with the reference's tokens, sentence starts and candidate spans (ids and labels kept)."""
    sent_starts = [token.is_sent_start for token in reference] if reference.has_annotation("SENT_START") else None
    doc = Doc(
        reference.vocab,
        words=[token.text for token in reference],
        spaces=[bool(token.whitespace_) for token in reference],
        sent_starts=sent_starts,
    )
    source = reference.ents if spans_key == ENTS else reference.spans.get(spans_key, [])
    spans = [Span(doc, span.start, span.end, span.label_, kb_id=span.kb_id_, span_id=span.id_) for span in source]
    if spans_key == ENTS:
        doc.ents = spans
    else:
        doc.spans[spans_key] = spans
    return doc


def make_sentence_groups_corpus(
    path: Union[str, Path], n_sents: int = 10, offsets: Sequence[int] = (0,)
) -> Callable[[Language], Iterator[Example]]:
    """Registered as `spacy-pairatt.SentenceGroupsCorpus.v1`: Docs of `n_sents` consecutive sentences
    of a .spacy file of one sentence per Doc (`spacy convert --n-sents 1`), once per offset.

    Offset 0 groups as `spacy convert --n-sents N` does; offset k starts with a Doc of the first k
    sentences, so that the sentences that open a Doc at offset 0 (where a senter learns nothing:
    a Doc's first token always starts a sentence) follow another sentence at offset k. The
    predicted side is the reference's text, as in `spacy.Corpus.v1`.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"SentenceGroupsCorpus: no such file {str(path)!r}")
    if n_sents < 1 or not offsets or any(not 0 <= offset < n_sents for offset in offsets):
        raise ValueError(
            f"SentenceGroupsCorpus: n_sents must be at least 1 and offsets a non-empty list of values in "
            f"[0, n_sents), got n_sents={n_sents}, offsets={list(offsets)}"
        )

    def read(nlp: Language) -> Iterator[Example]:
        sentences = list(DocBin().from_disk(path).get_docs(nlp.vocab))
        for offset in offsets:
            for group in sentence_groups(len(sentences), n_sents, offset):
                reference = Doc.from_docs([sentences[index] for index in group], ensure_whitespace=True)
                yield Example(nlp.make_doc(reference.text), reference)

    return read


def sentence_groups(n_sentences: int, n_sents: int, offset: int) -> List[range]:
    """Consecutive groups of n_sents sentence indices, the first of `offset` (when > 0)."""
    starts = ([0] if offset else []) + list(range(offset, n_sentences, n_sents))
    return [range(start, min(end, n_sentences)) for start, end in zip(starts, starts[1:] + [n_sentences])]
