"""pairatt_transformer: the stock transformer's outputs, with inference batches grouped by wordpieces."""

import numpy as np
from conftest import make_transformer_pipeline

from spacy_pairatt.components.transformer import padded_groups

TEXTS = [
    "The cat sat on the mat.",
    "See " + " ".join(["zqxjvk" * 12] * 4) + " today.",  # few tokens, many wordpieces (as URLs, IDs)
    "Dogs bark.",
    "A somewhat longer sentence about parsing with attention maps.",
]


def test_padded_groups_bound_padded_items_and_keep_every_doc_once():
    widths = np.array([10, 300, 12, 40, 0, 11])
    rows = np.array([1, 1, 2, 1, 0, 1])
    groups = padded_groups(widths, rows, max_items=64)
    assert sorted(i for group in groups for i in group) == list(range(6))
    for group in groups:
        assert len(group) == 1 or widths[group].max() * rows[group].sum() <= 64
        assert len(group) == 1 or widths[group].max() <= 2 * widths[group].min()
    assert [1] in groups  # wider than the budget: alone
    order = [i for group in groups for i in group]
    assert list(widths[order]) == sorted(widths)


def test_same_outputs_as_the_stock_transformer_without_padding_to_the_widest(tiny_bert_dir):
    ours = make_transformer_pipeline(tiny_bert_dir, factory="pairatt_transformer")
    stock = make_transformer_pipeline(tiny_bert_dir, factory="transformer")
    ours.initialize()
    stock.initialize()
    stock.get_pipe("transformer").model.from_bytes(ours.get_pipe("transformer").model.to_bytes())
    assert [len(doc) for doc in ours.pipe(["", "  "])] == [0, 1]  # Docs without windows
    our_docs = list(ours.pipe(TEXTS * 2, batch_size=8))
    stock_docs = list(stock.pipe(TEXTS * 2, batch_size=8))
    widths = []
    for ours_doc, stock_doc in zip(our_docs, stock_docs):
        ours_data, stock_data = ours_doc._.trf_data, stock_doc._.trf_data
        n = max(ours_data.wordpieces.lengths)  # unpadded wordpieces of the Doc's longest window
        widths.append(n)
        np.testing.assert_allclose(
            ours_data.model_output.last_hidden_state[:, :n],
            stock_data.model_output.last_hidden_state[:, :n],
            atol=1e-5,
        )
        for ours_layer, stock_layer in zip(ours_data.model_output.attentions, stock_data.model_output.attentions):
            np.testing.assert_allclose(ours_layer[..., :n, :n], stock_layer[..., :n, :n], atol=1e-5)
    widest = max(widths)
    assert all(doc._.trf_data.model_output.attentions[0].shape[-1] == widest for doc in stock_docs)
    short = [doc for doc, width in zip(our_docs, widths) if width < widest]
    assert short and all(doc._.trf_data.model_output.attentions[0].shape[-1] < widest for doc in short)
