"""Settings and learned state (docs/architecture.md#settings-and-learned-state), pipe by pipe: a saved
pipeline loaded with a config override runs the override, a value a tuning step set with
`set_setting` survives saving and loading, and learned state (the parser's temperatures) comes from
the saved pipe whatever the config says."""

import numpy as np
import pytest
import spacy
import srsly
from spacy.tokens import Span
from thinc.api import ConfigValidationError, fix_random_seed

from spacy_pairatt import set_setting
from tests.components.test_serialization import ENTITIES, SEGMENTER, TEXT, examples
from tests.conftest import make_transformer_pipeline

N_TOKENS = 11  # TEXT's tokens
N_RELATIONS = 3 * 2 * 2  # ENTITIES' ordered pairs, each with both labels


def override(name, **settings):
    return {"components": {name: settings}}


@pytest.fixture(scope="module")
def tuned(tiny_bert_dir, tmp_path_factory):
    """(the pipeline as its tuning steps left it, where it was saved): thresholds set with
    `set_setting` as `segmenter-sweep --store` does, the parser's temperature as `calibrate` fits it."""
    fix_random_seed(0)
    nlp = make_transformer_pipeline(tiny_bert_dir, span_window=16)
    nlp.add_pipe("sentencizer", first=True)
    nlp.add_pipe("pairatt_parser")
    nlp.add_pipe("pairatt_rel", config={"multi_label": True})
    nlp.add_pipe("pairatt_segmenter", name="segmenter", config={"model": SEGMENTER})
    for label in ("cause", "place"):
        nlp.get_pipe("pairatt_rel").add_label(label)
    nlp.initialize(lambda: examples(nlp))
    set_setting(nlp, "pairatt_rel", "threshold", 1.0)
    set_setting(nlp, "segmenter", "threshold", 1.0)
    nlp.get_pipe("pairatt_parser").cfg["arc_temperature"] = 1.5
    path = tmp_path_factory.mktemp("tuned") / "nlp"
    nlp.to_disk(path)
    return nlp, path


def relations(nlp):
    doc = nlp.make_doc(TEXT)
    doc.ents = [Span(doc, start, end, label) for start, end, label in ENTITIES]
    return nlp(doc)._.relations


def sentence_starts(nlp, preset=None):
    """The segmenter's sentence starts on TEXT alone; preset: {token: is_sent_start} set before it runs."""
    doc = nlp.make_doc(TEXT)
    for i, value in (preset or {}).items():
        doc[i].is_sent_start = value
    return [token.i for token in nlp.get_pipe("segmenter")(doc) if token.is_sent_start]


def test_a_tuned_value_is_in_the_config_and_the_cfg_and_survives_saving(tuned):
    nlp, path = tuned
    loaded = spacy.load(path)
    for pipeline in (nlp, loaded):
        for name in ("pairatt_rel", "segmenter"):
            assert pipeline.config["components"][name]["threshold"] == 1.0
            assert pipeline.get_pipe(name).cfg["threshold"] == pipeline.get_pipe(name).threshold == 1.0
        assert relations(pipeline) == []
        assert sentence_starts(pipeline) == [0]
    assert srsly.read_json(path / "segmenter" / "cfg")["threshold"] == 1.0


def test_relations_run_the_threshold_a_load_time_config_gives(tuned):
    _, path = tuned
    nlp = spacy.load(path, config=override("pairatt_rel", threshold=0.0))
    assert nlp.get_pipe("pairatt_rel").threshold == 0.0
    assert len(relations(nlp)) == N_RELATIONS


def test_the_segmenter_runs_the_threshold_and_overwrite_a_load_time_config_gives(tuned):
    _, path = tuned
    nlp = spacy.load(path, config=override("segmenter", threshold=0.0))
    assert sentence_starts(nlp) == list(range(N_TOKENS))
    assert 5 not in sentence_starts(nlp, {5: False})  # overwrite = false keeps a start set before
    nlp = spacy.load(path, config=override("segmenter", threshold=0.0, overwrite=True))
    assert sentence_starts(nlp, {5: False}) == list(range(N_TOKENS))


def test_the_parser_runs_the_settings_a_load_time_config_gives(tuned):
    _, path = tuned
    saved = spacy.load(path)
    doc = saved(TEXT)
    assert doc._.pairatt_confidence is not None and len(doc[1]._.head_candidates) == 3
    nlp = spacy.load(path, config=override("pairatt_parser", head_candidates=1))
    assert {len(token._.head_candidates) for token in nlp(TEXT)} == {1}
    nlp = spacy.load(path, config=override("pairatt_parser", confidence="none"))
    assert nlp(TEXT)._.pairatt_confidence is None


def test_the_parsers_fitted_temperature_is_learned_state_from_the_saved_pipe(tuned):
    nlp, path = tuned
    loaded = spacy.load(path, config=override("pairatt_parser", head_candidates=2))
    assert loaded.get_pipe("pairatt_parser").cfg["arc_temperature"] == 1.5
    head_prob = [token._.head_prob for token in loaded(TEXT)]
    np.testing.assert_allclose(head_prob, [token._.head_prob for token in nlp(TEXT)], rtol=1e-5)
    loaded.get_pipe("pairatt_parser").cfg["arc_temperature"] = 1.0
    assert not np.allclose(head_prob, [token._.head_prob for token in loaded(TEXT)])
    with pytest.raises(ConfigValidationError, match="arc_temperature"):  # no config can name it
        spacy.load(path, config=override("pairatt_parser", arc_temperature=2.0))


def test_assigning_a_setting_is_refused_with_the_way_that_keeps_the_config(tuned):
    nlp, _ = tuned
    with pytest.raises(AttributeError, match=r"set_setting\(nlp, 'pairatt_rel', 'threshold', 0.3\)"):
        nlp.get_pipe("pairatt_rel").threshold = 0.3
    with pytest.raises(ValueError, match=r"segmenter: threshold must be a number in \[0, 1\], got -0.1"):
        set_setting(nlp, "segmenter", "threshold", -0.1)
    with pytest.raises(KeyError, match="'labels' is not one of its settings"):
        set_setting(nlp, "pairatt_rel", "labels", [])
    assert nlp.get_pipe("segmenter").threshold == nlp.config["components"]["segmenter"]["threshold"] == 1.0


def test_a_segmenter_saved_with_a_threshold_in_its_cfg_only_runs_its_configs(tuned, tmp_path):
    """Before one rule, a threshold assigned by hand reached the segmenter's cfg and not the config,
    and loading ran the cfg's; now the config's runs."""
    _, path = tuned
    old = spacy.load(path)
    old.to_disk(tmp_path / "old")
    srsly.write_json(tmp_path / "old" / "segmenter" / "cfg", {**old.get_pipe("segmenter").cfg, "threshold": 0.0})
    assert sentence_starts(spacy.load(tmp_path / "old")) == [0]


def test_the_transformer_batches_by_the_max_batch_items_a_load_time_config_gives(tuned):
    _, path = tuned
    group_sizes = {}
    for label, config in (("saved", {}), ("override", override("transformer", max_batch_items=32))):
        nlp = spacy.load(path, config=config)
        transformer = nlp.get_pipe("transformer")
        sizes = group_sizes[label] = []
        predict = transformer.predict
        transformer.predict = lambda docs, predict=predict, sizes=sizes: sizes.append(len(docs)) or predict(docs)
        list(transformer.pipe(nlp.make_doc(TEXT) for _ in range(6)))
    assert group_sizes["saved"] == [6]
    assert max(group_sizes["override"]) < 6  # 32 padded wordpieces hold fewer than six windows of TEXT
