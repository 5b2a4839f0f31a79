"""Every pipe this package registers, saved and loaded alone: to_bytes / from_bytes and to_disk / from_disk
of the pipe (not the whole pipeline) into a fresh one, which then predicts as the original did, and each
part named in `exclude` left as it was. Also the tagging heads' architectures and the UD tokenizer.

One tiny random BERT pipeline (built once) holds the pipes; each test builds a fresh, uninitialized copy
from its config and loads into it only what the test needs.
"""

import re
import shutil

import numpy as np
import pytest
import spacy
import srsly
import torch
from spacy.tokens import Doc, Span
from spacy.training import Example
from thinc.api import fix_random_seed

from spacy_pairatt.integration.load_settings import set_setting
from spacy_pairatt.packaging.shipped_pipeline import model_weights
from spacy_pairatt.packaging.shipped_pipeline import same_weights as same_model_weights
from tests.conftest import REPO, make_transformer_pipeline, small_segmenter_model

TEXT = "Alice met Bob in Paris. They talked for hours."
ENTITIES = [(0, 1, "PER"), (2, 3, "PER"), (4, 5, "LOC")]
PROBE = "a-string-only-the-saved-vocab-has"
LISTENER = {
    "@architectures": "spacy-transformers.TransformerListener.v1",
    "grad_factor": 1.0,
    "upstream": "*",
    "pooling": {"@layers": "reduce_mean.v1"},
}
SURFACE_TAGGER = {
    "@architectures": "spacy.Tagger.v2",
    "nO": None,
    "normalize": False,
    "tok2vec": {
        "@architectures": "spacy-pairatt.SurfaceTok2Vec.v1",
        "surface_width": 8,
        "rows": [50, 50, 50, 50],
        "width": 16,
        "window_size": 1,
        "tok2vec": LISTENER,
    },
}
ENSEMBLE_TAGGER = {
    "@architectures": "spacy-pairatt.TaggerEnsemble.v1",
    "members": 2,
    "surface_width": 8,
    "rows": [50, 50, 50, 50],
    "width": 16,
    "depth": 1,
    "nO": None,
    "tok2vec": LISTENER,
}

SEGMENTER = small_segmenter_model(width=8, rows=(50, 50))

# Pipe name in its test pipeline -> (factory, which test pipeline holds it). The tagging heads are
# spaCy's `tagger` factory with this package's architectures.
PIPES = {
    "transformer": ("pairatt_transformer", "shared"),
    "pairatt_parser": ("pairatt_parser", "shared"),
    "pairatt_rel": ("pairatt_rel", "shared"),
    "surface_tagger": ("tagger", "shared"),
    "ensemble_tagger": ("tagger", "shared"),
    "segmenter": ("pairatt_segmenter", "shared"),
    "lemmatizer": ("pairatt_lemmatizer", "shared"),
    "frozen": ("pairatt_frozen_transformer", "frozen"),
}
# Factories whose pipe holds no state: nothing to save but its config, checked with the whole pipeline
# (pairatt_bounded_memory's in tests/integration/test_memory.py).
STATELESS = {"pairatt_release_attention", "pairatt_bounded_memory"}


def registered(group: str):
    """Names setup.py registers under an entry-point group."""
    block = re.search(rf'"{group}": \[(.*?)\]', (REPO / "setup.py").read_text(encoding="utf8"), re.S).group(1)
    return set(re.findall(r'"([\w.-]+) = ', block))


def test_every_registered_factory_is_saved_and_loaded_here():
    tested = {factory for factory, _ in PIPES.values()} | STATELESS
    assert registered("spacy_factories") <= tested


def gold_docs(vocab):
    """Two sentences with heads, labels and tags, the parser's and taggers' training data."""
    words = [["Alice", "met", "Bob", "."], ["They", "talked", "."]]
    heads = [[1, 1, 1, 1], [1, 1, 1]]
    deps = [["nsubj", "ROOT", "obj", "punct"], ["nsubj", "ROOT", "punct"]]
    tags = [["NNP", "VBD", "NNP", "."], ["PRP", "VBD", "."]]
    lemmas = [["Alice", "meet", "Bob", "."], ["they", "talk", "."]]
    return [
        Doc(vocab, words=w, heads=h, deps=d, tags=t, lemmas=m)
        for w, h, d, t, m in zip(words, heads, deps, tags, lemmas)
    ]


def examples(nlp):
    return [Example(nlp.make_doc(doc.text), doc) for doc in gold_docs(nlp.vocab)]


def perturbed(nlp, name):
    """nlp, with the encoder of its transformer `name` no longer the one saved at its path."""
    with torch.no_grad():
        nlp.get_pipe(name).model.transformer.embeddings.word_embeddings.weight.add_(0.01)
    return nlp


def randomise_softmaxes(model):
    """spaCy's softmax heads start at zero (every tag equally likely); random weights make predictions differ."""
    for node in model.walk():
        if node.name == "softmax" and node.has_param("W"):
            shape = node.get_param("W").shape
            node.set_param("W", np.random.default_rng(node.id).normal(size=shape).astype("f"))


@pytest.fixture(scope="module")
def shared(tiny_bert_dir):
    fix_random_seed(0)
    nlp = make_transformer_pipeline(tiny_bert_dir, span_window=16)
    nlp.add_pipe("sentencizer", first=True)
    nlp.add_pipe("pairatt_parser")
    nlp.add_pipe("pairatt_rel", config={"multi_label": True, "threshold": 0.0})
    nlp.add_pipe("tagger", name="surface_tagger", config={"model": SURFACE_TAGGER})
    nlp.add_pipe("tagger", name="ensemble_tagger", config={"model": ENSEMBLE_TAGGER})
    nlp.add_pipe("pairatt_segmenter", name="segmenter", config={"model": SEGMENTER, "overwrite": True})
    nlp.add_pipe("pairatt_lemmatizer", name="lemmatizer", config={"model": SURFACE_TAGGER, "min_tree_freq": 1})
    nlp.add_pipe("pairatt_release_attention", config={"keep": "float16"})
    for label in ("cause", "place"):
        nlp.get_pipe("pairatt_rel").add_label(label)
    nlp.initialize(lambda: examples(nlp))
    for name in ("surface_tagger", "ensemble_tagger", "segmenter", "lemmatizer"):
        randomise_softmaxes(nlp.get_pipe(name).model)
    set_setting(nlp, "segmenter", "threshold", 0.3)  # as `segmenter-sweep --store` leaves it
    nlp.get_pipe("pairatt_parser").cfg["arc_temperature"] = 1.5  # as `calibrate` leaves it
    return perturbed(nlp, "transformer")


@pytest.fixture(scope="module")
def frozen(tiny_bert_dir):
    template = make_transformer_pipeline(tiny_bert_dir, span_window=16, factory="pairatt_frozen_transformer")
    config = {key: value for key, value in template.config["components"]["transformer"].items() if key != "factory"}
    nlp = spacy.blank("en")
    nlp.add_pipe("pairatt_frozen_transformer", name="frozen", config=config)
    nlp.initialize(lambda: examples(nlp))
    nlp.get_pipe("frozen").update(examples(nlp))  # fills its cache, which is never saved
    assert nlp.get_pipe("frozen").cache
    return perturbed(nlp, "frozen")


@pytest.fixture
def source(request, name):
    """The trained pipeline that holds the pipe `name`."""
    return request.getfixturevalue(PIPES[name][1])


def fresh(nlp, name, load_upstream=False):
    """An uninitialized pipeline of the pipe `name` and those it reads, built from nlp's config; with
    load_upstream, the pipes it reads loaded from nlp's."""
    config = nlp.config.copy()
    names = [pipe for pipe in nlp.pipe_names if pipe in ("sentencizer", *upstream(name), name)]
    config["nlp"]["pipeline"] = names
    config["components"] = {pipe: config["components"][pipe] for pipe in names}
    copy = spacy.util.load_model_from_config(config, auto_fill=False)
    for pipe in upstream(name) if load_upstream else ():
        copy.get_pipe(pipe).from_bytes(nlp.get_pipe(pipe).to_bytes())
    return copy


def upstream(name):
    """The stateful pipes that `name` reads: the transformer, for the pipes listening to it."""
    return () if name in ("transformer", "frozen") else ("transformer",)


def prediction(nlp, name):
    """What the pipe `name` gives the Doc of TEXT, after the pipes it reads (the others may be unloaded)."""
    doc = nlp.make_doc(TEXT)
    doc.ents = [Span(doc, start, end, label) for start, end, label in ENTITIES]
    for pipe_name, pipe in nlp.pipeline:
        if pipe_name in ("sentencizer", *upstream(name), name):
            doc = pipe(doc)
    if name == "pairatt_parser":
        return [(t.head.i, t.dep_, round(t._.head_prob, 5)) for t in doc]
    if name == "pairatt_rel":
        return [(r.head, r.tail, r.label, round(r.score, 5)) for r in doc._.relations]
    if name.endswith("tagger") or name in ("segmenter", "lemmatizer"):
        return np.asarray(nlp.get_pipe(name).model.predict([doc])[0]).round(5).tolist()
    output = doc._.trf_data.model_output
    return [np.asarray(output.last_hidden_state).round(5).tolist(), np.asarray(output.attentions[-1]).round(5).tolist()]


def weights(pipe):
    """Every weight of a pipe's model: thinc parameters and the PyTorch modules' state."""
    return model_weights(pipe.model)


def same_weights(pipe, other) -> bool:
    return same_model_weights(pipe.model, other.model)


@pytest.mark.parametrize("name", PIPES)
def test_pipe_alone_round_trips_through_bytes(source, name):
    copy = fresh(source, name, load_upstream=True)
    copy.get_pipe(name).from_bytes(source.get_pipe(name).to_bytes())
    assert copy.get_pipe(name).cfg == source.get_pipe(name).cfg
    assert same_weights(copy.get_pipe(name), source.get_pipe(name))
    assert prediction(copy, name) == prediction(source, name)


@pytest.mark.parametrize("name", PIPES)
def test_pipe_alone_round_trips_through_disk(source, name, tmp_path):
    copy = fresh(source, name, load_upstream=True)
    source.get_pipe(name).to_disk(tmp_path / name)
    copy.get_pipe(name).from_disk(tmp_path / name)
    assert copy.get_pipe(name).cfg == source.get_pipe(name).cfg
    assert same_weights(copy.get_pipe(name), source.get_pipe(name))
    assert prediction(copy, name) == prediction(source, name)


def saved_and_loaded(source, copy, name, exclude, medium, path):
    """Save source's pipe `name` and load it into copy's, both with `exclude`; returns the saved fields."""
    pipe = source.get_pipe(name)
    if medium == "bytes":
        data = pipe.to_bytes(exclude=exclude)
        copy.get_pipe(name).from_bytes(data, exclude=exclude)
        return set(srsly.msgpack_loads(data))
    shutil.rmtree(path, ignore_errors=True)
    pipe.to_disk(path, exclude=exclude)
    copy.get_pipe(name).from_disk(path, exclude=exclude)
    return {file.name for file in path.iterdir()}


@pytest.mark.parametrize("name", PIPES)
def test_excluded_parts_are_neither_saved_nor_loaded(source, name, tmp_path):
    """One fresh pipe loaded in turn without its model and vocab (disk), cfg and vocab (bytes), cfg (disk)."""
    pipe, copy = source.get_pipe(name), fresh(source, name)
    target = copy.get_pipe(name)
    source.vocab.strings.add(PROBE)
    assert PROBE not in copy.vocab.strings
    untrained = weights(target)

    assert not {"model", "vocab"} & saved_and_loaded(source, copy, name, ["model", "vocab"], "disk", tmp_path / name)
    assert {key: target.cfg[key] for key in pipe.cfg} == pipe.cfg
    if name in ("pairatt_parser", "pairatt_rel"):  # the saved sizes build the pair scorer, with new weights
        assert len(weights(target)) == len(weights(pipe)) and not same_weights(target, pipe)
    else:
        assert len(weights(target)) == len(untrained) and not same_weights(target, pipe)

    target.cfg["excluded-probe"] = True
    assert not {"cfg", "vocab"} & saved_and_loaded(source, copy, name, ["cfg", "vocab"], "bytes", tmp_path / name)
    assert target.cfg["excluded-probe"] is True and same_weights(target, pipe)
    assert PROBE not in copy.vocab.strings

    del target.cfg["excluded-probe"]
    target.cfg["excluded-probe-disk"] = True
    assert "cfg" not in saved_and_loaded(source, copy, name, ["cfg"], "disk", tmp_path / name)
    assert target.cfg["excluded-probe-disk"] is True and PROBE in copy.vocab.strings


def test_the_encoders_config_survives_loading(shared, tmp_path):
    """spacy-transformers reads the saved Hugging Face config back through JSON, which rounds BERT's
    layer_norm_eps of 1e-12 to 0.0; pairatt_transformer puts the saved value back."""
    assert shared.get_pipe("transformer").model.transformer.config.layer_norm_eps == 1e-12
    copy = fresh(shared, "transformer")
    copy.get_pipe("transformer").from_bytes(shared.get_pipe("transformer").to_bytes())
    assert copy.get_pipe("transformer").model.transformer.config.layer_norm_eps == 1e-12
    shared.get_pipe("transformer").to_disk(tmp_path / "transformer")
    copy = fresh(shared, "transformer")
    copy.get_pipe("transformer").from_disk(tmp_path / "transformer")
    assert copy.get_pipe("transformer").model.transformer.config.layer_norm_eps == 1e-12
    for layer in copy.get_pipe("transformer").model.transformer.modules():
        assert getattr(layer, "eps", 1e-12) == 1e-12  # the rebuilt LayerNorms too


def test_an_uninitialized_transformer_loads_without_its_model(shared):
    copy = fresh(shared, "transformer")
    copy.get_pipe("transformer").from_bytes(shared.get_pipe("transformer").to_bytes(), exclude=["model"])
    assert copy.get_pipe("transformer").model.transformer is None


def test_loading_clears_the_frozen_transformers_cache(frozen, tmp_path):
    copy = fresh(frozen, "frozen")
    copy.get_pipe("frozen").from_bytes(frozen.get_pipe("frozen").to_bytes())
    copy.get_pipe("frozen").update(examples(copy))
    assert copy.get_pipe("frozen").cache
    copy.get_pipe("frozen").from_bytes(frozen.get_pipe("frozen").to_bytes())
    assert not copy.get_pipe("frozen").cache
    copy.get_pipe("frozen").update(examples(copy))
    frozen.get_pipe("frozen").to_disk(tmp_path / "frozen")
    copy.get_pipe("frozen").from_disk(tmp_path / "frozen")
    assert not copy.get_pipe("frozen").cache


def test_whole_pipeline_with_the_stateless_release_pipe_round_trips(shared, tmp_path):
    """pairatt_release_attention has no state to save: its setting travels in config.cfg."""
    assert not hasattr(shared.get_pipe("pairatt_release_attention"), "to_bytes")
    shared.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("pairatt_release_attention").keep == "float16"
    for name in ("pairatt_parser", "pairatt_rel", "surface_tagger"):
        assert prediction(loaded, name) == prediction(shared, name)
    kept, loaded_kept = (nlp(TEXT)._.pairatt_attention for nlp in (shared, loaded))
    assert [(start, end) for start, end, _ in kept] == [(start, end) for start, end, _ in loaded_kept]
    for (_, _, maps), (_, _, loaded_maps) in zip(kept, loaded_kept):
        np.testing.assert_array_equal(maps, loaded_maps)


TOKENIZER_TEXTS = ["I'll e-mail you at 5:30pm -- ok?!", "Y'all can't call 555-123-4567 in the 1990s."]


def test_ud_english_tokenizer_round_trips_alone(tmp_path):
    assert registered("spacy_tokenizers") == {"spacy-pairatt.ud_english_tokenizer.v1"}
    config = {"nlp": {"tokenizer": {"@tokenizers": "spacy-pairatt.ud_english_tokenizer.v1"}}}
    nlp = spacy.blank("en", config=config)
    expected = [[t.text for t in nlp.make_doc(text)] for text in TOKENIZER_TEXTS]

    def tokens(tokenizer):
        return [[t.text for t in tokenizer(text)] for text in TOKENIZER_TEXTS]

    assert tokens(spacy.blank("en").tokenizer.from_bytes(nlp.tokenizer.to_bytes())) == expected
    nlp.tokenizer.to_disk(tmp_path / "tokenizer")
    assert tokens(spacy.blank("en").tokenizer.from_disk(tmp_path / "tokenizer")) == expected
    without_rules = spacy.blank("en").tokenizer.from_bytes(nlp.tokenizer.to_bytes(), exclude=["exceptions"])
    assert without_rules.rules != nlp.tokenizer.rules
