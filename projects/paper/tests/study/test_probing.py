"""The probing study's pieces: pair features, negative sampling, importance summary, UAS, and one
tiny end-to-end run (on a random BERT: its figures mean nothing)."""

import json

import numpy as np
import pytest

from pairatt_paper.probe_pairs import (
    PairFeatureLayout,
    all_candidate_pairs,
    pair_feature_matrix,
    sample_negatives,
)
from pairatt_paper.probe_report import probe_markdown, write_probe_report
from pairatt_paper.probing import (
    encode,
    encoder_layout,
    frozen_encoder,
    gold_heads,
    greedy_uas,
    importance_summary,
    read_conllu_docs,
    run_probe,
)
from spacy_pairatt.layers.pair_batch import sentence_features
from tests.conftest import UD_DIR

TRAIN = UD_DIR / "en_ewt-ud-train.conllu"
DEV = UD_DIR / "en_ewt-ud-dev.conllu"


@pytest.fixture(scope="module")
def ewt_docs():
    if not TRAIN.exists():
        pytest.skip(f"UD English-EWT not found at {TRAIN}")
    return read_conllu_docs(TRAIN, 6)


@pytest.fixture(scope="module")
def encoder(tiny_bert_dir):
    return frozen_encoder(tiny_bert_dir)


def test_reads_sentences_with_gold_heads(ewt_docs):
    assert len(ewt_docs) == 6
    # EWT train sentence 1: "Al - Zaman : American forces killed Shaikh Abdullah al - Ani, ..."
    doc = ewt_docs[0]
    heads = gold_heads(doc)
    assert heads.shape == (len(doc),)
    assert (heads == 0).sum() == 1  # one root per sentence
    assert doc[0].text == "Al" and heads[0] == 0  # "Al" is the root of this headline
    assert heads[1] == 3  # "-" attaches to "Zaman", word 3


def test_pair_features_are_hidden_states_and_pooled_attention(encoder, ewt_docs):
    layout = encoder_layout(encoder)
    assert (layout.width, layout.n_layers, layout.n_heads) == (32, 2, 4)
    doc, features = next(encode(encoder, [ewt_docs[1]]))
    n = len(doc)
    dependents, candidates = all_candidate_pairs(n)
    rows = pair_feature_matrix(features, dependents, candidates)
    assert rows.shape == (n * n, layout.n_columns) == (n * n, 2 * 32 + 2 * 8)
    # Recompute from the transformer output with the parser's own pooling.
    (sentence,), _ = sentence_features([doc], [doc._.trf_data], use_attention=True)
    attention = sentence.attention
    a_ij, a_ji = layout.columns(["a_ij"]), layout.columns(["a_ji"])
    np.testing.assert_allclose(rows[:, a_ij], attention[:, dependents, candidates].T, rtol=1e-6)
    np.testing.assert_allclose(rows[:, a_ji], attention[:, candidates, dependents].T, rtol=1e-6)
    np.testing.assert_allclose(rows[:, layout.columns(["T_i"])], features.hidden[dependents], rtol=1e-6)
    np.testing.assert_allclose(rows[:, layout.columns(["T_j"])], features.hidden[candidates], rtol=1e-6)
    # a_ij of (word 2, word 5) is the attention of word 2 to word 5 in every layer and head
    pair = np.flatnonzero((dependents == 2) & (candidates == 5))[0]
    np.testing.assert_allclose(rows[pair, a_ij], attention[:, 2, 5], rtol=1e-6)


def test_all_candidates_cover_root_and_other_words():
    dependents, candidates = all_candidate_pairs(3)
    assert sorted(zip(dependents.tolist(), candidates.tolist())) == [
        (1, 0), (1, 2), (1, 3), (2, 0), (2, 1), (2, 3), (3, 0), (3, 1), (3, 2)
    ]  # fmt: skip


def test_negatives_never_gold_or_self_and_distinct(ewt_docs):
    rng = np.random.default_rng(0)
    for doc in ewt_docs:
        heads = gold_heads(doc)
        dependents, candidates = sample_negatives(heads, 5, rng)
        assert not (candidates == heads[dependents - 1]).any()
        assert not (candidates == dependents).any()
        assert ((candidates >= 0) & (candidates <= len(doc))).all()
        assert len(set(zip(dependents.tolist(), candidates.tolist()))) == len(dependents)
        assert (np.bincount(dependents, minlength=len(doc) + 1)[1:] == min(5, len(doc) - 1)).all()


def test_negatives_of_a_two_word_sentence_are_all_that_is_left():
    # word 1 -> root, word 2 -> word 1: the only non-arcs are (1, 2) and (2, 0)
    dependents, candidates = sample_negatives(np.array([0, 1]), 5, np.random.default_rng(0))
    assert sorted(zip(dependents.tolist(), candidates.tolist())) == [(1, 2), (2, 0)]


def test_importance_summary_counts_attention_and_embedding():
    layout = PairFeatureLayout(width=2, n_layers=2, n_heads=2)
    assert layout.names() == [
        "T_i_0", "T_i_1", "T_j_0", "T_j_1",
        "a_ij_L1H1", "a_ij_L1H2", "a_ij_L2H1", "a_ij_L2H2",
        "a_ji_L1H1", "a_ji_L1H2", "a_ji_L2H1", "a_ji_L2H2",
    ]  # fmt: skip
    gains = np.zeros(12)
    gains[[7, 0, 9, 3, 4]] = [50, 40, 30, 20, 10]  # a_ij L2H2, T_i[0], a_ji L1H2, T_j[1], a_ij L1H1
    summary = importance_summary(gains, layout, np.arange(12), top_k=4, top_attention=2)
    assert (summary["top_k_attention"], summary["top_k_embedding"]) == (2, 2)
    assert summary["top_k_attention_share"] == 0.5
    assert summary["attention_gain_share"] == pytest.approx(90 / 150)
    assert [(f["part"], f["layer"], f["head"]) for f in summary["top_attention"]] == [("a_ij", 2, 2), ("a_ji", 1, 2)]
    assert summary["top_attention"][0]["gain_share"] == pytest.approx(50 / 150)
    assert summary["attention_gain_grid"]["a_ij"] == [[10, 0], [0, 50]]
    assert summary["attention_gain_grid"]["a_ji"] == [[0, 30], [0, 0]]
    # zero-gain features never count, and an attention-only probe maps its columns back
    attention_columns = layout.columns(["a_ij", "a_ji"])
    only = importance_summary(gains[attention_columns], layout, attention_columns, top_k=100)
    assert (only["top_k_attention"], only["top_k_embedding"], only["top_k_attention_share"]) == (3, 0, 1.0)


def test_greedy_uas_picks_best_candidate_per_word():
    # sentence 0: word 1 (gold head 0) and word 2 (gold 1, punctuation); sentence 1: word 1 (gold 2)
    sentence = np.array([0, 0, 0, 0, 1, 1])
    dependent = np.array([1, 1, 2, 2, 1, 1])
    score = np.array([0.9, 0.2, 0.1, 0.8, 0.3, 0.6])
    is_gold = np.array([True, False, True, False, False, True])
    scored = np.array([True, True, False, False, True, True])
    assert greedy_uas(sentence, dependent, score, is_gold, scored) == 1.0
    assert greedy_uas(sentence, dependent, score, is_gold, np.ones(6, bool)) == pytest.approx(2 / 3)
    shuffled = np.random.default_rng(0).permutation(6)
    assert greedy_uas(
        sentence[shuffled], dependent[shuffled], score[shuffled], is_gold[shuffled], np.ones(6, bool)
    ) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="No scored word"):
        greedy_uas(sentence, dependent, score, is_gold, np.zeros(6, bool))


def test_unknown_part_is_named():
    with pytest.raises(ValueError, match="T_k"):
        PairFeatureLayout(2, 1, 1).columns(["T_k"])


def test_tiny_probe_end_to_end(tiny_bert_dir, ewt_docs, tmp_path):
    pytest.importorskip("lightgbm")
    if not DEV.exists():
        pytest.skip(f"UD English-EWT dev not found at {DEV}")
    result = run_probe(TRAIN, DEV, tiny_bert_dir, max_sentences=20, max_eval_sentences=5, rounds=5)
    json.dumps(result)  # serialisable as it is
    assert set(result["probes"]) == {"attention", "embedding", "both"}
    assert result["probes"]["attention"]["n_features"] == 16
    assert result["probes"]["embedding"]["n_features"] == 64
    assert result["probes"]["embedding"]["importance"]["top_attention"] == []
    assert result["probes"]["attention"]["importance"]["top_k_embedding"] == 0
    for probe in result["probes"].values():
        assert 0.0 <= probe["uas"] <= 1.0
    data = result["data"]
    assert data["train"]["sentences"] == 20 and data["eval"]["sentences"] == 5
    assert data["train"]["gold_pairs"] == data["train"]["words"]
    assert data["eval"]["gold_pairs"] == data["eval"]["words"]
    markdown = probe_markdown(result, "python -m pairatt_paper probe ...", "probe_importance.png")
    command = "python -m pairatt_paper probe"
    written = write_probe_report(result, tmp_path / "probe.json", tmp_path / "probe.md", command)
    recorded = json.loads((tmp_path / "probe.json").read_text())["provenance"]
    assert recorded["seed"] == 0 and recorded["command"] == "python -m pairatt_paper probe"
    assert recorded["versions"]["lightgbm"] and written.startswith("#")
    assert "| both (T_i, T_j, a_ij, a_ji) | 80 |" in markdown
    assert "<!-- attention-maps:start -->" in markdown and "<!-- relation-maps:end -->" in markdown
