"""spacy-pairatt.SurfaceTok2Vec.v1: what an uncased encoder cannot see reaches the tagging heads;
spacy-pairatt.DropoutBiLSTMEncoder.v1: each Doc read alone, with spaCy's BiLSTM encoder's weights."""

import numpy as np
import pytest
import spacy
import torch
from spacy.ml.models.tok2vec import BiLSTMEncoder
from thinc.api import Dropout, Model, chain, set_dropout_rate
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from spacy_pairatt.layers.surface import LengthAwareLSTM, build_dropout_bilstm_encoder, build_surface_tok2vec


def same_vector_for_every_token(width: int = 8) -> Model:
    """A stand-in for an uncased encoder's listener: one vector for every token, cased or not."""

    def forward(model, docs, is_train):
        outputs = [model.ops.alloc2f(len(doc), width) + 1.0 for doc in docs]
        return outputs, lambda d_outputs: []

    return Model("same_vector", forward)


def vectors(model: Model, nlp, texts):
    docs = [nlp.make_doc(text) for text in texts]
    return [np.asarray(vecs) for vecs in model.predict(docs)]


@pytest.fixture
def nlp():
    return spacy.blank("en")


def test_capitalised_and_lower_case_tokens_get_different_vectors(nlp):
    model = build_surface_tok2vec(same_vector_for_every_token(), surface_width=16, width=12, window_size=0)
    docs = [nlp.make_doc(text) for text in ("The dog", "the dog")]
    model.initialize(X=docs)
    cased, lower = vectors(model, nlp, ["The dog", "the dog"])
    assert cased.shape == (2, 12)
    assert not np.allclose(cased[0], lower[0])
    np.testing.assert_allclose(cased[1], lower[1], rtol=1e-6)


def test_a_window_lets_a_token_see_its_neighbours_spelling(nlp):
    texts = ["end . Next", "end , Next"]
    for window_size, changes in ((0, False), (1, True)):
        model = build_surface_tok2vec(
            same_vector_for_every_token(), surface_width=16, width=12, window_size=window_size
        )
        model.initialize(X=[nlp.make_doc(text) for text in texts])
        full_stop, comma = vectors(model, nlp, texts)
        assert (not np.allclose(full_stop[2], comma[2])) == changes, window_size


def test_each_attribute_needs_one_table_size(nlp):
    with pytest.raises(ValueError, match="one table size per attribute"):
        build_surface_tok2vec(same_vector_for_every_token(), attrs=["NORM", "SHAPE"], rows=[1000])
    with pytest.raises(ValueError, match="window_size must be an integer >= 0"):
        build_surface_tok2vec(same_vector_for_every_token(), window_size=-1)


def test_the_bilstm_encoder_carries_a_word_to_the_far_end_of_the_doc(nlp):
    """Stage 2's senter: a token reads words beyond any window (here eight tokens back), and dropout
    acts only while training."""
    texts = ["Hi , a b c d e f g h", "hi , a b c d e f g h"]
    surface = build_surface_tok2vec(same_vector_for_every_token(), surface_width=16, width=12, window_size=0)
    model = chain(surface, build_dropout_bilstm_encoder(width=12, depth=1))
    model.initialize(X=[nlp.make_doc(text) for text in texts])
    cased, lower = vectors(model, nlp, texts)
    assert cased.shape == (10, 12)
    assert not np.allclose(cased[-1], lower[-1])
    set_dropout_rate(model, 0.5)  # what spacy train does with training.dropout
    docs = [nlp.make_doc(text) for text in texts]
    first, second = (np.asarray(model(docs, is_train=True)[0][0]) for _ in range(2))
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(cased, vectors(model, nlp, texts)[0])


def test_the_bilstm_encoder_refuses_widths_it_cannot_split(nlp):
    with pytest.raises(ValueError, match="width must be even"):
        build_dropout_bilstm_encoder(width=13)
    with pytest.raises(ValueError, match="depth must be an integer >= 1"):
        build_dropout_bilstm_encoder(width=12, depth=0)


def random_sequences(lengths, width, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(length, width)).astype("f") for length in lengths]


@pytest.mark.parametrize("depth", [1, 2])
def test_the_bilstm_encoder_reads_each_doc_as_if_alone(depth):
    """A Doc's vectors and its input gradient do not depend on the Docs batched with it (padded, the
    backward direction of a short Doc started at the batch's padding), and an empty Doc passes."""
    encoder = build_dropout_bilstm_encoder(width=12, depth=depth)
    batch = random_sequences([3, 40, 0, 17], 12)
    encoder.initialize(X=batch)
    batched, backprop = encoder(batch, is_train=True)
    d_batch = backprop([np.ones_like(vectors) for vectors in batched])
    assert [v.shape for v in batched] == [(3, 12), (40, 12), (0, 12), (17, 12)]
    for k, sequence in enumerate(batch):
        if not len(sequence):
            continue
        alone, backprop_alone = encoder([sequence], is_train=True)
        np.testing.assert_allclose(batched[k], alone[0], atol=1e-6)
        np.testing.assert_allclose(d_batch[k], backprop_alone([np.ones_like(alone[0])])[0], atol=1e-6)


def test_the_bilstm_encoder_loads_the_weights_of_spacys_and_matches_it_on_one_doc():
    """Pipelines trained when it was spaCy's BiLSTMEncoder load unchanged, and a Doc alone (nothing to
    pad) gets what spaCy's gives it."""
    batch = random_sequences([5, 9], 12, seed=1)
    spacys = chain(Dropout(), BiLSTMEncoder(width=12, depth=2, dropout=0.0), Dropout())
    spacys.initialize(X=batch)
    ours = build_dropout_bilstm_encoder(width=12, depth=2)
    ours.initialize(X=batch)
    ours.from_bytes(spacys.to_bytes())
    for sequence in batch:
        np.testing.assert_allclose(ours.predict([sequence])[0], spacys.predict([sequence])[0], atol=1e-6)
    # batched, spaCy's short Doc differs from itself alone; ours does not
    assert not np.allclose(spacys.predict(batch)[0], spacys.predict(batch[:1])[0], atol=1e-6)
    np.testing.assert_allclose(ours.predict(batch)[0], ours.predict(batch[:1])[0], atol=1e-6)


def test_the_length_aware_lstm_gives_what_torchs_lstm_over_packed_sequences_gives():
    """Outputs, and the gradients of the inputs and of every weight, as torch's LSTM over packed
    sequences (each sequence alone) gives them; padding rows are zeros."""
    torch.manual_seed(0)
    lengths = torch.tensor([7, 2, 0, 5])
    padded = torch.randn(7, 4, 6) * (torch.arange(7).unsqueeze(1) < lengths).unsqueeze(-1)
    ours = LengthAwareLSTM(6, 3, 2, bidirectional=True)
    reference = torch.nn.LSTM(6, 3, 2, bidirectional=True)
    reference.load_state_dict(ours.state_dict())
    inputs, reference_inputs = padded.clone().requires_grad_(), padded.clone().requires_grad_()
    output = ours(inputs, lengths)[0]
    read = lengths > 0
    packed = pack_padded_sequence(reference_inputs[:, read], lengths[read], enforce_sorted=False)
    expected = torch.zeros_like(output)
    expected[:, read] = pad_packed_sequence(reference(packed)[0], total_length=7)[0]
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=1e-5)
    weights = torch.randn_like(output)
    (output * weights).sum().backward()
    (expected * weights).sum().backward()
    torch.testing.assert_close(inputs.grad, reference_inputs.grad, atol=1e-6, rtol=1e-5)
    for (name, ours_weight), reference_weight in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(ours_weight.grad, reference_weight.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert list(ours.state_dict()) == list(reference.state_dict())  # no template among its weights
