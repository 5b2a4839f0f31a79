"""`pairatt_transformer`: spacy-transformers' `transformer`, batched by wordpieces at inference.

The stock component groups a batch's Docs by their number of *tokens* and pads each group to its
longest window in *wordpieces*. With attention output that padding is quadratic: one 54-token
sentence of 337 wordpieces (a URL, an e-mail address) padded its 63 neighbours' attention to
337 x 337 per layer and head, about 2 GB for the batch, and made parsing EWT test 40% slower.
Grouping by the wordpieces of each Doc's longest window, with no window padded to more than
twice its length, keeps such Docs together. Same config,
model and weights as `transformer`; every listener works unchanged.
"""

from typing import Callable, Iterable, Iterator, List

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import minibatch
from spacy_transformers.data_classes import FullTransformerBatch
from spacy_transformers.pipeline_component import DEFAULT_CONFIG, Transformer, install_extensions
from thinc.api import Model


@Language.factory(
    "pairatt_transformer",
    assigns=["doc._.trf_data"],
    default_config=DEFAULT_CONFIG["transformer"],
)
def make_pairatt_transformer(
    nlp: Language,
    name: str,
    model: Model[List[Doc], FullTransformerBatch],
    set_extra_annotations: Callable[[List[Doc], FullTransformerBatch], None],
    max_batch_items: int,
):
    """spacy-transformers' `transformer` with inference batches grouped by wordpieces."""
    return WordpieceBatchedTransformer(
        nlp.vocab, model, set_extra_annotations, max_batch_items=max_batch_items, name=name
    )


def padded_groups(widths: np.ndarray, rows: np.ndarray, max_items: int, max_stretch: float = 2.0) -> List[List[int]]:
    """Indices of Docs grouped by width (wordpieces of the longest window), ascending.

    A group holds at most max_items padded wordpieces (width x windows; a Doc wider than that is
    alone, as in spacy-transformers) and pads no window to more than max_stretch times the
    group's narrowest: attention grows with the square of the padded width.
    """
    groups: List[List[int]] = []
    group: List[int] = []
    group_rows = 0
    for index in np.argsort(widths, kind="stable"):
        if group and (
            widths[index] * (group_rows + rows[index]) > max_items or widths[index] > max_stretch * widths[group[0]]
        ):
            groups.append(group)
            group, group_rows = [], 0
        group.append(int(index))
        group_rows += int(rows[index])
    if group:
        groups.append(group)
    return groups


class WordpieceBatchedTransformer(Transformer):
    def window_sizes(self, docs: List[Doc]):
        """(widths, rows): each Doc's longest window in wordpieces and its number of windows."""
        nested_spans = self.model.attrs["get_spans"](docs)
        texts = [span.text for spans in nested_spans for span in spans]
        encoded = self.model.tokenizer(texts, add_special_tokens=True)["input_ids"] if texts else []
        lengths = [len(ids) for ids in encoded]
        rows = np.array([len(spans) for spans in nested_spans], dtype="int64")
        ends = np.cumsum(rows)
        widths = np.array(
            [max(lengths[end - n : end], default=0) for end, n in zip(ends, rows)], dtype="int64"
        )
        return widths, rows

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        install_extensions()
        for outer_batch in minibatch(stream, batch_size):
            outer_batch = list(outer_batch)
            widths, rows = self.window_sizes(outer_batch)
            for indices in padded_groups(widths, rows, self.cfg["max_batch_items"]):
                group = [outer_batch[i] for i in indices]
                self.set_annotations(group, self.predict(group))
            yield from outer_batch
