"""`pairatt_release_attention`: drop the wordpiece attention from `Doc._.trf_data` once it is used.

The attention of every layer and head is about 5 MB per 128-wordpiece window with MiniLM (150 MB
for a 512-wordpiece BERT-base window): kept on every Doc it dominates memory, and a `DocBin`
with user data would store it. Put this component after the last component that reads
attention. The hidden states and the alignment stay, so other listeners keep working.

keep = "float16" or "float32" keeps, for inspection, the word-level attention of each sentence
(what the parser reads: L*H x (n+1) x (n+1), unit 0 the root) as `doc._.pairatt_attention`, a
list of (start, end, array) per sentence; a few hundred kB per sentence instead of megabytes.
"""

from typing import Iterable, Iterator, List, Optional, Tuple

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy_transformers.data_classes import TransformerData
from transformers.file_utils import ModelOutput

from ..integration.extensions import register_extensions
from ..layers.pair_batch import sentence_features

KEEP_CHOICES = (None, "float16", "float32")
WordAttention = List[Tuple[int, int, np.ndarray]]


@Language.factory(
    "pairatt_release_attention",
    requires=["doc._.trf_data"],
    default_config={"keep": None},
)
def make_attention_release(nlp: Language, name: str, keep: Optional[str]):
    return AttentionRelease(name, keep=keep)


class AttentionRelease:
    """Replaces each Doc's TransformerData by one without attention (optionally keeping word-level maps)."""

    def __init__(self, name: str = "pairatt_release_attention", *, keep: Optional[str] = None):
        if keep not in KEEP_CHOICES:
            raise ValueError(f"pairatt_release_attention: keep must be one of {KEEP_CHOICES}, got {keep!r}")
        register_extensions()
        self.name = name
        self.keep = keep

    def __call__(self, doc: Doc) -> Doc:
        if not Doc.has_extension("trf_data"):
            return doc
        trf_data = doc._.trf_data
        output = trf_data.model_output if trf_data is not None else None
        if not output or "attentions" not in output:
            return doc
        if self.keep is not None:
            doc._.pairatt_attention = word_attention(doc, trf_data, np.dtype(self.keep))
        doc._.trf_data = TransformerData(
            wordpieces=trf_data.wordpieces,
            model_output=ModelOutput({key: value for key, value in output.items() if key != "attentions"}),
            align=trf_data.align,
        )
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterator[Doc]:
        for doc in docs:
            yield self(doc)


def word_attention(doc: Doc, trf_data: TransformerData, dtype: np.dtype) -> WordAttention:
    """(start, end, L*H x (n+1) x (n+1) attention) for each sentence, as the parser pools it."""
    features, sentences = sentence_features([doc], [trf_data], use_attention=True)
    return [(start, start + n, unit.attention.astype(dtype)) for unit, (_, start, n) in zip(features, sentences)]
