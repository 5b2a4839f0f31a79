"""Corpus readers for the relation component: gold tokens and gold candidate spans on the predicted side.

Relation extraction on SemEval and DocRED is evaluated with the entities given, so the Doc the
pipeline sees must carry the reference's tokens, sentence starts and candidate spans (not its
relations). spaCy's own `spacy.Corpus.v1` gives the pipeline only the raw text.
"""

from pathlib import Path
from typing import Callable, Iterator, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry

from ..integration.doc_relations import ENTS
from ..integration.extensions import register_extensions


@registry.readers("spacy-pairatt.GoldSpansCorpus.v1")
def make_gold_spans_corpus(
    path: Union[str, Path], spans_key: str = ENTS, limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """Registered as `spacy-pairatt.GoldSpansCorpus.v1`: Examples from a .spacy file (with user data).

    limit: read at most this many Docs (0: all).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"GoldSpansCorpus: no such file {str(path)!r}")
    register_extensions()

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
