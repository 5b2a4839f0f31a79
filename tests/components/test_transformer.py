"""pairatt_transformer: the stock transformer's outputs, batches grouped by wordpieces (prediction, training)."""

import numpy as np
import torch
from spacy.tokens import Doc
from spacy_transformers.data_classes import FullTransformerBatch
from thinc.api import Adam

from spacy_pairatt.components.transformer import padded_groups, split_by_doc
from tests.conftest import examples_from_docs, make_pipeline, make_transformer_pipeline

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


def test_split_by_doc_is_the_stock_split(tiny_bert_dir):
    """Per-Doc outputs and alignments as spacy-transformers' own split gives them, Docs without
    windows and Docs of several windows included."""
    nlp = make_transformer_pipeline(tiny_bert_dir, span_window=8)
    nlp.initialize()
    docs = [nlp.make_doc(text) for text in ["", *TEXTS, "  ", *TEXTS]]
    batch = nlp.get_pipe("transformer").model.predict(docs)
    ours, stock = split_by_doc(batch), FullTransformerBatch.split_by_doc(batch)
    assert len(ours) == len(stock) == len(docs)
    for doc, mine, theirs in zip(docs, ours, stock):
        assert np.array_equal(mine.align.data, theirs.align.data)
        assert np.array_equal(mine.align.lengths, theirs.align.lengths)
        assert np.array_equal(mine.wordpieces.input_ids, theirs.wordpieces.input_ids)
        assert mine.model_output.keys() == theirs.model_output.keys()
        if "last_hidden_state" in mine.model_output:
            assert np.array_equal(mine.model_output.last_hidden_state, theirs.model_output.last_hidden_state)
            for layer, stock_layer in zip(mine.model_output.attentions, theirs.model_output.attentions):
                assert np.array_equal(layer, stock_layer)
    assert sum("last_hidden_state" in data.model_output for data in ours) == 2 * len(TEXTS) + 1
    assert any(len(doc) > 8 for doc in docs)  # a Doc of several windows


def transformer_gradients_of_update(nlp, examples):
    """Widths of the transformer's forward passes in one update, and its parameters' gradients."""
    transformer = nlp.get_pipe("transformer")
    torch_model = transformer.model.layers[0].shims[0]._model
    torch_model.zero_grad()
    begin_update = transformer.model.begin_update
    widths = []

    def recorded(docs):
        output, backprop = begin_update(docs)
        widths.append(output.model_output.last_hidden_state.shape[1])
        return output, backprop

    transformer.model.begin_update = recorded
    try:
        transformer.update(examples, drop=0.0)
        nlp.get_pipe("pairatt_parser").update(examples, drop=0.0)
    finally:
        del transformer.model.begin_update
    return widths, {name: p.grad.clone() for name, p in torch_model.named_parameters() if p.grad is not None}


def test_training_runs_one_pass_per_width_group_with_the_gradients_of_one_pass(
    tiny_bert_dir, ud_train_docs, monkeypatch
):
    """A batch of short sentences and one of many wordpieces is not padded to the widest in
    training either: one forward and backward pass per width group, and the same transformer
    gradients as one pass over the whole padded batch."""
    nlp = make_pipeline(tiny_bert_dir)
    long_words = ["See", "zqxjvk" * 12, "zqxjvk" * 12, "today", "."]
    long_doc = Doc(nlp.vocab, words=long_words, heads=[0, 0, 1, 0, 0], deps=["root", "obj", "compound", "obl", "punct"])
    examples = examples_from_docs(nlp, list(ud_train_docs[:8]) + [long_doc])
    nlp.initialize(lambda: examples)
    for pipe in ("transformer", "pairatt_parser"):  # no dropout: the two runs must see the same network
        for module in (node for shim in nlp.get_pipe(pipe).model.walk() for node in shim.shims):
            for layer in module._model.modules():
                if isinstance(layer, torch.nn.Dropout):
                    layer.p = 0.0
                if hasattr(layer, "dropout_prob"):  # Hugging Face's eager attention reads this
                    layer.dropout_prob = 0.0
    grouped_widths, grouped = transformer_gradients_of_update(nlp, examples)
    transformer = nlp.get_pipe("transformer")
    monkeypatch.setattr(transformer, "width_groups", lambda docs: [list(range(len(docs)))])
    single_widths, single = transformer_gradients_of_update(nlp, examples)
    assert len(single_widths) == 1 and len(grouped_widths) >= 2
    assert min(grouped_widths) * 2 < max(grouped_widths) == single_widths[0]
    assert grouped.keys() == single.keys() and grouped
    for name, gradient in grouped.items():
        torch.testing.assert_close(gradient, single[name], atol=1e-5, rtol=1e-4, msg=name)


LEARN_RATE = 0.001
STOCK_LISTENER = {
    "@architectures": "spacy-transformers.TransformerListener.v1",
    "grad_factor": 1.0,
    "pooling": {"@layers": "reduce_mean.v1"},
}


def encoder_and_head_after_three_updates(tiny_bert_dir, ud_train_docs, learn_rate_scale):
    """(encoder weights before, after, head weights before, after) of three nlp.update of transformer + tagger."""
    nlp = make_transformer_pipeline(tiny_bert_dir)
    nlp.get_pipe("transformer").learn_rate_scale = learn_rate_scale
    nlp.add_pipe("tagger", config={"model": {"tok2vec": STOCK_LISTENER}})
    examples = examples_from_docs(nlp, list(ud_train_docs[:8]))
    # Adam without weight decay (which moves every weight, gradient or not) or clipping.
    optimizer = nlp.initialize(lambda: examples, sgd=Adam(LEARN_RATE, L2=0.0, grad_clip=0.0))
    encoder = nlp.get_pipe("transformer").model.layers[0].shims[0]._model
    softmax = next(node for node in nlp.get_pipe("tagger").model.walk() if node.name == "softmax")
    encoder_before = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    head_before = softmax.get_param("W").copy()
    for _ in range(3):  # the softmax starts from zeros: the encoder's first nonzero step is in the third update
        nlp.update(examples, sgd=optimizer, drop=0.0)
    encoder_after = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    return encoder_before, encoder_after, head_before, softmax.get_param("W").copy()


def largest_step(before, after):
    return float(abs(after - before).max())


def test_learn_rate_scale_scales_the_encoders_updates_and_not_the_heads(tiny_bert_dir, ud_train_docs):
    """learn_rate_scale 0 keeps the encoder's weights while the head learns; 0.5 moves them half as
    far as 1 and the head as far.

    Compared by the largest step of each weight matrix: Adam's first step has the same size,
    learning rate x lr_scale x a constant, for every weight whose gradient is well above eps, while
    the weights' values differ between runs by rounding noise that Adam magnifies near zero."""
    frozen = encoder_and_head_after_three_updates(tiny_bert_dir, ud_train_docs, 0.0)
    half = encoder_and_head_after_three_updates(tiny_bert_dir, ud_train_docs, 0.5)
    full = encoder_and_head_after_three_updates(tiny_bert_dir, ud_train_docs, 1.0)
    assert all(torch.equal(frozen[0][key], frozen[1][key]) for key in frozen[0])
    moved = [key for key in full[0] if largest_step(full[0][key], full[1][key]) > LEARN_RATE / 10]
    assert len(moved) > len(full[0]) / 2
    for key in moved:
        half_step, full_step = largest_step(half[0][key], half[1][key]), largest_step(full[0][key], full[1][key])
        assert abs(half_step - full_step / 2) <= 1e-2 * full_step, key
    head_steps = [largest_step(head_before, head_after) for _, _, head_before, head_after in (frozen, half, full)]
    assert min(head_steps) > LEARN_RATE / 10
    assert max(head_steps) - min(head_steps) <= 0.05 * max(head_steps)
