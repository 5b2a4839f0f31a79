"""`pairatt_frozen_transformer`: a transformer that is never trained, its training outputs cached.

The paper's feature-based (`fea:`) rows train the classifier alone on fixed BERT features. The
encoder then gives the same hidden states and attention for a sentence in every epoch, so they are
computed once per distinct training sentence and kept, keyed by the Doc's content (text, token
boundaries, encoder windows): the corpus reader re-creates the Docs every epoch, so object
identity would never hit. Only `update` (training) fills and reads the cache; at inference the
component is `pairatt_transformer`. The cache is not serialised.

spaCy cannot initialize a transformer listed in [training] frozen_components unless it is sourced
from a saved pipeline (`init_nlp` initializes the other components only, and the listening
components then find no transformer), so this component freezes itself instead: it stays
out of frozen_components, its `update` sets `doc._.trf_data` on the training Docs, where
the listeners read it (spacy-transformers' listener does so when no batch was sent to it), and
`finish_update` leaves the weights as they are.
"""

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
from spacy.attrs import IDX, LENGTH
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy_transformers.data_classes import FullTransformerBatch, TransformerData, WordpieceBatch
from spacy_transformers.pipeline_component import DEFAULT_CONFIG
from thinc.api import Model, Optimizer, to_numpy
from thinc.types import Ragged
from transformers.file_utils import ModelOutput

from .transformer import WordpieceBatchedTransformer

CACHE_DTYPES = ("float32", "float16")
CacheKey = Tuple[str, bytes]


@Language.factory(
    "pairatt_frozen_transformer",
    assigns=["doc._.trf_data"],
    default_config={**DEFAULT_CONFIG["transformer"], "cache_dtype": "float32", "max_cached_docs": 20000},
)
def make_pairatt_frozen_transformer(
    nlp: Language,
    name: str,
    model: Model[List[Doc], FullTransformerBatch],
    set_extra_annotations: Callable[[List[Doc], FullTransformerBatch], None],
    max_batch_items: int,
    cache_dtype: str,
    max_cached_docs: int,
):
    """`pairatt_transformer` with frozen weights and its training outputs cached.

    cache_dtype: precision of the cached hidden states and attention ("float16" halves the
    memory; the Docs always get float32). max_cached_docs: once the cache holds that many Docs,
    new ones are encoded every time and not cached (unlike LRU, which evicts on every miss
    when epochs cycle through more Docs than it holds, the cache then keeps a fixed share).
    """
    return FrozenTransformer(
        nlp.vocab,
        model,
        set_extra_annotations,
        max_batch_items=max_batch_items,
        name=name,
        cache_dtype=cache_dtype,
        max_cached_docs=max_cached_docs,
    )


class FrozenTransformer(WordpieceBatchedTransformer):
    """WordpieceBatchedTransformer whose training Docs get cached, fixed outputs (no dropout, no updates)."""

    def __init__(self, *args, cache_dtype: str = "float32", max_cached_docs: int = 20000, **kwargs):
        if cache_dtype not in CACHE_DTYPES:
            raise ValueError(
                f"pairatt_frozen_transformer: cache_dtype must be one of {CACHE_DTYPES}, got {cache_dtype!r}"
            )
        if max_cached_docs < 0:
            raise ValueError(f"pairatt_frozen_transformer: max_cached_docs must be >= 0, got {max_cached_docs}")
        super().__init__(*args, **kwargs)
        self.cache_dtype = np.dtype(cache_dtype)
        self.max_cached_docs = max_cached_docs
        self.cache: Dict[CacheKey, TransformerData] = {}

    @property
    def cache_nbytes(self) -> int:
        """Bytes held by the cached arrays."""
        return sum(data_nbytes(data) for data in self.cache.values())

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None):
        """Load the encoder and link the listeners; refuse the configs that defeat the cache."""
        if nlp is not None and self.name in nlp.config["training"]["annotating_components"]:
            raise ValueError(
                f"pairatt_frozen_transformer '{self.name}' sets doc._.trf_data on the training Docs "
                "itself; listed in [training] annotating_components it would run the encoder again on "
                "every batch. Remove it from annotating_components (and keep it out of frozen_components)."
            )
        self.cache.clear()
        super().initialize(get_examples, nlp=nlp)

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Set each training Doc's TransformerData, from the cache or the (frozen) encoder."""
        validate_examples(examples, "FrozenTransformer.update")
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)  # the training logger lists every trainable component
        docs = [eg.predicted for eg in examples]
        keys = [content_key(doc, spans) for doc, spans in zip(docs, self.model.attrs["get_spans"](docs))]
        missing = {key: doc for doc, key in zip(docs, keys) if key not in self.cache}
        compact = {key: self.cache[key] for key in keys if key in self.cache}
        for key, doc in zip(list(missing), self.pipe(list(missing.values()), batch_size=max(len(missing), 1))):
            compact[key] = compact_copy(doc._.trf_data, self.cache_dtype)
            if len(self.cache) < self.max_cached_docs:
                self.cache[key] = compact[key]
        for doc, key in zip(docs, keys):
            doc._.trf_data = restored_copy(compact[key], self.model.ops.asarray)
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """The encoder's weights never change."""

    def from_bytes(self, bytes_data, *, exclude=tuple()):
        self.cache.clear()
        return super().from_bytes(bytes_data, exclude=exclude)

    def from_disk(self, path, *, exclude=tuple()):
        self.cache.clear()
        return super().from_disk(path, exclude=exclude)


def content_key(doc: Doc, spans: List[Span]) -> CacheKey:
    """What the encoder's output for a Doc depends on: its text, token boundaries and windows."""
    bounds = np.concatenate(
        [doc.to_array([IDX, LENGTH]).ravel(), np.array([(s.start, s.end) for s in spans], dtype="uint64").ravel()]
    )
    return doc.text, bounds.tobytes()


def compact_copy(data: TransformerData, dtype: np.dtype) -> TransformerData:
    """A host-memory copy of one Doc's TransformerData with the padding of its windows cut off.

    A Doc's windows come padded to the longest window of the batch it was encoded with; the
    attention grows with the square of that width. Float arrays are stored as `dtype`.
    """
    lengths = np.asarray(data.wordpieces.lengths, dtype="int64")
    if not len(lengths):
        return TransformerData.empty()
    padded, width = data.wordpieces.input_ids.shape[1], int(lengths.max())
    indices = to_numpy(data.align.dataXd).astype("int64")
    wordpieces = data.wordpieces
    return TransformerData(
        wordpieces=WordpieceBatch(
            strings=[list(strings) for strings in wordpieces.strings],
            input_ids=to_numpy(wordpieces.input_ids)[:, :width].copy(),
            attention_mask=to_numpy(wordpieces.attention_mask)[:, :width].copy(),
            lengths=lengths.tolist(),
            token_type_ids=None
            if wordpieces.token_type_ids is None
            else to_numpy(wordpieces.token_type_ids)[:, :width].copy(),
        ),
        model_output=ModelOutput({key: trim_output(value, width, dtype) for key, value in data.model_output.items()}),
        align=Ragged(
            (indices // padded * width + indices % padded).astype(data.align.dataXd.dtype),
            to_numpy(data.align.lengths).copy(),
        ),
    )


def trim_output(value, width: int, dtype: np.dtype):
    """A model output cut to `width` wordpieces: (W, P, ...) hidden states, (W, H, P, P) attention."""
    if isinstance(value, (list, tuple)):
        return [trim_output(layer, width, dtype) for layer in value]
    array = to_numpy(value)
    if array.ndim == 4:
        array = array[:, :, :width, :width]
    elif array.ndim == 3:
        array = array[:, :width]
    return array.astype(dtype) if array.dtype.kind == "f" else array.copy()


def restored_copy(data: TransformerData, asarray: Callable) -> TransformerData:
    """A fresh float32 TransformerData from a cached one: downstream changes never reach the cache."""

    def restored(value):
        if isinstance(value, list):
            return [restored(layer) for layer in value]
        return asarray(value.astype("float32") if value.dtype.kind == "f" else value.copy())

    wordpieces = data.wordpieces
    return TransformerData(
        wordpieces=WordpieceBatch(
            strings=[list(strings) for strings in wordpieces.strings],
            input_ids=asarray(wordpieces.input_ids.copy()),
            attention_mask=asarray(wordpieces.attention_mask.copy()),
            lengths=list(wordpieces.lengths),
            token_type_ids=None if wordpieces.token_type_ids is None else asarray(wordpieces.token_type_ids.copy()),
        ),
        model_output=ModelOutput({key: restored(value) for key, value in data.model_output.items()}),
        align=Ragged(data.align.dataXd.copy(), data.align.lengths.copy()),
    )


def data_nbytes(data: TransformerData) -> int:
    arrays = [data.wordpieces.input_ids, data.wordpieces.attention_mask, data.align.dataXd, data.align.lengths]
    for value in data.model_output.values():
        arrays.extend(value if isinstance(value, list) else [value])
    return sum(array.nbytes for array in arrays if array is not None)
