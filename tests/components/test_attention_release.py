"""pairatt_release_attention: the attention maps leave the Doc after the parser; nothing else changes."""

import numpy as np
import pytest
from spacy.tokens import DocBin

from spacy_pairatt.layers.pair_batch import sentence_features
from tests.conftest import make_pipeline

TEXTS = ["The parser reads the attention between words. It builds one tree per sentence.", "Dogs bark loudly."]


@pytest.fixture(scope="module")
def nlp(tiny_bert_dir):
    nlp = make_pipeline(tiny_bert_dir)
    nlp.add_pipe("sentencizer", first=True)
    nlp.get_pipe("pairatt_parser").add_label("dep")
    nlp.initialize()
    return nlp


def parse(nlp, keep="absent"):
    if keep != "absent":
        nlp.add_pipe("pairatt_release_attention", config={"keep": keep})
    try:
        return list(nlp.pipe(TEXTS))
    finally:
        if keep != "absent":
            nlp.remove_pipe("pairatt_release_attention")


def test_release_drops_attention_and_keeps_parse_and_hidden_states(nlp):
    kept, released = parse(nlp), parse(nlp, keep=None)
    for before, after in zip(kept, released):
        assert "attentions" in before._.trf_data.model_output
        assert "attentions" not in after._.trf_data.model_output
        np.testing.assert_array_equal(
            before._.trf_data.model_output.last_hidden_state, after._.trf_data.model_output.last_hidden_state
        )
        assert [(t.head.i, t.dep_) for t in before] == [(t.head.i, t.dep_) for t in after]
        assert after._.pairatt_attention is None
    kept_bytes = len(DocBin(docs=kept, store_user_data=True).to_bytes())
    released_bytes = len(DocBin(docs=released, store_user_data=True).to_bytes())
    assert released_bytes < kept_bytes / 2


def test_keep_float16_holds_the_word_level_maps_the_parser_reads(nlp):
    full, kept = parse(nlp), parse(nlp, keep="float16")
    for doc, doc_kept in zip(full, kept):
        attentions = doc._.trf_data.model_output["attentions"]
        features, _ = sentence_features([doc], [doc._.trf_data], use_attention=True)
        sentences = [(sent.start, sent.end) for sent in doc.sents]
        assert [(start, end) for start, end, _ in doc_kept._.pairatt_attention] == sentences
        for (start, end), (_, _, maps), expected in zip(sentences, doc_kept._.pairatt_attention, features):
            assert maps.dtype == np.float16
            assert maps.shape == (len(attentions) * attentions[0].shape[1], end - start + 1, end - start + 1)
            np.testing.assert_allclose(maps, expected.attention, rtol=1e-2, atol=1e-3)


def test_unknown_keep_value_is_refused(nlp):
    with pytest.raises(ValueError, match="keep must be one of"):
        nlp.add_pipe("pairatt_release_attention", name="bad_release", config={"keep": "int8"})
