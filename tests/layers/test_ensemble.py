"""spacy-pairatt.TaggerEnsemble.v1: the mean of its members' probabilities, and each member trained on its
own cross-entropy (the gradients equal those of training the members one by one)."""

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import Model

from spacy_pairatt.layers.ensemble import build_tagger_ensemble, first_members

WIDTH = 6


def fixed_vectors() -> Model:
    """A stand-in for the listener: fixed random vectors per token (by its text), no parameters."""
    rng = np.random.default_rng(0)
    table = {}

    def forward(model, docs, is_train):
        vectors = [
            np.array([table.setdefault(t.text, rng.normal(size=WIDTH)) for t in doc], "f").reshape(len(doc), WIDTH)
            for doc in docs
        ]
        return vectors, lambda d_vectors: []

    return Model("fixed_vectors", forward, dims={"nO": WIDTH})


@pytest.fixture(scope="module")
def docs():
    nlp = spacy.blank("en")
    return [nlp("The cat sat. It slept on the mat."), nlp("Hello there! How are you?")]


def one_hot_starts(docs):
    """Sentence starts as the senter's labels (I, S): a Doc's first token and each token after . ! ?"""
    return [np.eye(2, dtype="f")[[int(t.i == 0 or doc[t.i - 1].text in ".!?") for t in doc]] for doc in docs]


def built(members):
    return build_tagger_ensemble(fixed_vectors(), members=members, surface_width=4, rows=(50, 50, 50, 50), width=8)


def initialised(docs, members=3):
    model = built(members)
    model.initialize(X=docs, Y=one_hot_starts(docs))
    # Zero-initialised softmaxes would give every member the same output; perturb them to test the mean.
    for node in model.walk():
        if node.name == "softmax" and node.has_param("W"):
            node.set_param("W", np.random.default_rng(node.id).normal(size=node.get_param("W").shape).astype("f"))
    return model


def members_alone(model, docs):
    """Each member's own forward: listener, its spelling features, its head."""
    members = model.attrs["members"]
    listener, surfaces, heads = model.layers[0], model.layers[1 : 1 + members], model.layers[1 + members :]
    vectors, _ = listener(docs, False)
    outputs = []
    for surface, head in zip(surfaces, heads):
        features, backprop_surface = surface(docs, True)
        probs, backprop_head = head([np.hstack((v, s)) for v, s in zip(vectors, features)], True)
        outputs.append((probs, backprop_head, backprop_surface))
    return outputs


def gradients(model):
    return {
        (node.id, name): node.get_grad(name).copy()
        for node in model.walk()
        for name in node.param_names
        if node.has_grad(name)
    }


def zero_gradients(model):
    for node in model.walk():
        for name in node.param_names:
            if node.has_grad(name):
                node.set_grad(name, np.zeros_like(node.get_grad(name)))


def test_the_output_is_the_mean_of_the_members_probabilities(docs):
    model = initialised(docs)
    alone = members_alone(model, docs)
    predicted = model.predict(docs)
    for i, doc in enumerate(docs):
        expected = np.mean([probs[i] for probs, _, _ in alone], axis=0)
        np.testing.assert_allclose(predicted[i], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(predicted[i].sum(axis=1), 1.0, rtol=1e-5)
    # The members differ, so the mean is not any one of them.
    assert not np.allclose(alone[0][0][0], alone[1][0][0])


def test_each_member_gets_the_gradient_of_its_own_cross_entropy(docs):
    model = initialised(docs)
    gold = one_hot_starts(docs)
    # The second Doc's last token unannotated: the loss passes back a zero row there.
    annotated = [np.ones(len(doc), bool) for doc in docs]
    annotated[1][-1] = False

    zero_gradients(model)
    mean, backprop = model.begin_update(docs)
    assert backprop([(p - y) * a[:, None] for p, y, a in zip(mean, gold, annotated)]) == []
    from_ensemble = gradients(model)

    zero_gradients(model)
    for probs, backprop_head, backprop_surface in members_alone(model, docs):
        d_inputs = backprop_head([(p - y) * a[:, None] for p, y, a in zip(probs, gold, annotated)])
        backprop_surface([d[:, WIDTH:] for d in d_inputs])
    one_by_one = gradients(model)

    assert from_ensemble.keys() == one_by_one.keys() and len(from_ensemble) > 0
    for key in from_ensemble:
        np.testing.assert_allclose(from_ensemble[key], one_by_one[key], rtol=1e-4, atol=1e-6)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="TaggerEnsemble.v1: members must be an integer >= 1, got 0"):
        build_tagger_ensemble(fixed_vectors(), members=0)
    with pytest.raises(ValueError, match="TaggerEnsemble.v1: attrs .* must have one table size per attribute"):
        build_tagger_ensemble(fixed_vectors(), rows=(10, 10))
    with pytest.raises(ValueError, match="TaggerEnsemble.v1: initialize needs sample Docs"):
        build_tagger_ensemble(fixed_vectors()).initialize()


def test_an_empty_doc_and_no_docs(docs):
    model = initialised(docs)
    empty = Doc(docs[0].vocab, words=[])
    probs = model.predict([empty, docs[0]])
    assert probs[0].shape == (0, 2) and probs[1].shape == (len(docs[0]), 2)
    assert model.predict([]) == []


def test_its_first_members_are_the_mean_of_those_members_alone_and_share_their_weights(docs):
    model = initialised(docs, members=3)
    alone = members_alone(model, docs)
    for count in (1, 2, 3):
        kept = first_members(model, count)
        assert kept.attrs["members"] == count and len(kept.layers) == 1 + 2 * count
        for i in range(len(docs)):
            expected = np.mean([probs[i] for probs, _, _ in alone[:count]], axis=0)
            np.testing.assert_allclose(kept.predict(docs)[i], expected, rtol=1e-5, atol=1e-6)
    kept = first_members(model, 2)
    assert kept.layers[0] is model.layers[0] and kept.layers[2] is model.layers[2] and kept.layers[3] is model.layers[4]


def test_saved_first_members_load_into_the_ensemble_built_with_that_many(docs):
    """What `segmenter-sweep --store` relies on: the cut model's weights are those of `members = count`."""
    kept = first_members(initialised(docs, members=3), 2)
    loaded = built(2)
    loaded.initialize(X=docs, Y=one_hot_starts(docs))
    loaded.from_bytes(kept.to_bytes())
    for mine, theirs in zip(loaded.predict(docs), kept.predict(docs)):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(ValueError):  # and not into the whole ensemble: the structure differs
        initialised(docs, members=3).from_bytes(kept.to_bytes())


def test_only_an_ensemble_keeps_members_and_only_as_many_as_it_has(docs):
    model = initialised(docs, members=3)
    for count in (0, 4):
        with pytest.raises(ValueError, match=f"TaggerEnsemble.v1: cannot keep {count} of its 3 members"):
            first_members(model, count)
    with pytest.raises(ValueError, match="the model is 'fixed_vectors', not .*TaggerEnsemble.v1's"):
        first_members(fixed_vectors(), 1)
