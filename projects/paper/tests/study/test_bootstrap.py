"""The paired bootstrap over documents: on counts where the answer is known."""

import numpy as np
import pytest

from pairatt_paper.bootstrap import f_score, paired_bootstrap, paired_bootstrap_seeds, resampled_scores


def counts(correct, predicted, gold):
    return {"uas_correct": correct, "uas_predicted": predicted, "gold": gold}


def test_f_score_is_spacys_attachment_score():
    # 3 of 4 gold arcs found among 5 predicted: P 3/5, R 3/4, F = 2*3/(5+4)
    assert f_score(np.array(3), np.array(5), np.array(4)) == pytest.approx(6 / 9)
    assert f_score(np.array(0), np.array(0), np.array(0)) == 0.0


def test_identical_systems_differ_by_nothing():
    system = counts([3, 5, 2, 7], [4, 5, 3, 8], [4, 6, 3, 8])
    result = paired_bootstrap(system, system, n_resamples=300)
    assert (result["difference"], result["low"], result["high"]) == (0.0, 0.0, 0.0)
    assert result["p_not_better"] == 1.0


def test_a_system_better_on_every_document_has_an_interval_above_zero():
    gold = [10] * 50
    worse = counts([6] * 50, gold, gold)
    better = counts([8] * 49 + [6], gold, gold)
    result = paired_bootstrap(better, worse, n_resamples=2000, seed=1)
    assert result["difference"] == pytest.approx(100 * (0.8 * 49 + 0.6 - 0.6 * 50) / 50, abs=0.01)
    assert 0 < result["low"] <= result["difference"] <= result["high"]
    assert result["p_not_better"] == 0.0
    assert paired_bootstrap(better, worse, n_resamples=2000, seed=1) == result  # seeded
    swapped = paired_bootstrap(worse, better, n_resamples=2000, seed=1)
    assert swapped["difference"] == -result["difference"] and swapped["p_not_better"] == 1.0


def test_one_lucky_document_gives_an_interval_across_zero():
    gold = [10] * 40
    worse = counts([7] * 40, gold, gold)
    better = counts([7] * 39 + [10], gold, gold)
    result = paired_bootstrap(better, worse, n_resamples=2000)
    assert result["difference"] > 0 and result["low"] <= 0 < result["high"]
    assert 0.2 < result["p_not_better"] < 0.5  # the lucky document is left out of ~37% of resamples


def test_different_documents_and_unknown_metrics_are_refused():
    with pytest.raises(ValueError, match="same, non-empty documents"):
        paired_bootstrap(counts([1], [1], [2]), counts([1], [1], [3]))
    with pytest.raises(ValueError, match="same, non-empty documents"):
        paired_bootstrap(counts([], [], []), counts([], [], []))
    with pytest.raises(ValueError, match="metric must be 'uas' or 'las'"):
        paired_bootstrap(counts([1], [1], [2]), counts([1], [1], [2]), metric="f1")


def test_resampled_scores_sum_each_seeds_counts_over_the_drawn_documents():
    # 2 seeds, 3 documents of 4 gold arcs; every arc predicted, so F = correct / gold
    counts = np.array([[[4, 2, 0], [1, 1, 1]], [[4, 4, 4], [4, 4, 4]]])
    gold = np.array([4, 4, 4])
    assert resampled_scores(counts, gold, np.arange(3)).tolist() == pytest.approx([50.0, 25.0])
    drawn = np.array([[0, 0, 0], [2, 2, 1]])
    np.testing.assert_allclose(resampled_scores(counts, gold, drawn), [[100.0, 100 * 2 / 12], [25.0, 25.0]])


def test_one_seed_pooled_is_the_plain_paired_bootstrap():
    rng = np.random.default_rng(3)
    gold = rng.integers(5, 30, size=80)
    systems = [counts(rng.binomial(gold, p), gold, gold) for p in (0.8, 0.78)]
    pooled = paired_bootstrap_seeds([systems[0]], [systems[1]], n_resamples=500, seed=4)
    plain = paired_bootstrap(*systems, n_resamples=500, seed=4)
    assert pooled["by_seed"] == [plain["difference"]] and pooled["n_seeds"] == 1
    assert {key: pooled[key] for key in plain} == plain


def test_a_known_difference_is_recovered_pooled_over_seeds():
    """Three seeds whose differences are exactly +4, +2 and +3 points (every arc predicted, gold 10
    a document): the pooled difference is their mean, +3, and the interval lies above 0 around it."""
    gold = [10] * 200
    rng = np.random.default_rng(0)
    worse, better = [], []
    for gain in (4, 2, 3):
        base = rng.integers(5, 8, size=200)  # 5 to 7 of 10 right
        improved = base.copy()
        improved[rng.choice(200, size=20 * gain, replace=False)] += 1  # 20 * gain more of 2,000 arcs
        worse.append(counts(base.tolist(), gold, gold))
        better.append(counts(improved.tolist(), gold, gold))
    result = paired_bootstrap_seeds(better, worse, n_resamples=2000, seed=1)
    assert result["by_seed"] == pytest.approx([4.0, 2.0, 3.0])
    assert result["difference"] == pytest.approx(3.0)
    assert 0 < result["low"] < 3.0 < result["high"] < 6.0 and result["p_not_better"] == 0.0


def test_identical_systems_pooled_over_seeds_have_an_interval_covering_zero():
    rng = np.random.default_rng(5)
    gold = rng.integers(5, 30, size=60)
    seeds = [counts(rng.binomial(gold, 0.8), gold, gold) for _ in range(3)]
    result = paired_bootstrap_seeds(seeds, seeds, n_resamples=500)
    assert result["by_seed"] == [0.0, 0.0, 0.0] and result["low"] <= 0 <= result["high"]
    # two noisy systems of the same quality: an interval that spans 0, not one above it
    other = [counts(rng.binomial(gold, 0.8), gold, gold) for _ in range(3)]
    noisy = paired_bootstrap_seeds(other, seeds, n_resamples=2000, seed=2)
    assert noisy["low"] < 0 < noisy["high"]


def test_pooled_seeds_must_pair_up_on_the_same_documents():
    one = counts([1, 2], [2, 2], [2, 2])
    with pytest.raises(ValueError, match="one pair of systems per seed"):
        paired_bootstrap_seeds([one, one], [one])
    with pytest.raises(ValueError, match="one pair of systems per seed"):
        paired_bootstrap_seeds([], [])
    with pytest.raises(ValueError, match="same, non-empty documents"):
        paired_bootstrap_seeds([one, one], [one, counts([1], [2], [2])])


def semeval_labels(rng, n):
    """n random 19-way SemEval labels."""
    from spacy_pairatt.corpora.relation_metrics import SEMEVAL_LABELS

    return [SEMEVAL_LABELS[i] for i in rng.integers(0, len(SEMEVAL_LABELS), size=n)]


def test_summed_sentence_counts_give_the_official_macro_f1():
    """Any multiset of sentences: macro-F1 from the summed counts equals the official scorer's on it."""
    from spacy_pairatt.corpora.relation_metrics import (
        semeval_macro_f1,
        semeval_official_scores,
        semeval_sentence_counts,
    )

    rng = np.random.default_rng(0)
    gold, predicted = semeval_labels(rng, 300), semeval_labels(rng, 300)
    predicted[:120] = gold[:120]  # many right, some with the direction wrong among the rest
    counts = semeval_sentence_counts(gold, predicted)
    assert semeval_macro_f1(counts.sum(1)) == pytest.approx(semeval_official_scores(gold, predicted)["macro_f1"])
    drawn = rng.integers(0, 300, size=300)
    expected = semeval_official_scores([gold[i] for i in drawn], [predicted[i] for i in drawn])["macro_f1"]
    assert semeval_macro_f1(counts[:, drawn].sum(1)) == pytest.approx(expected)


def test_sentence_counts_check_labels_as_the_official_scorer_does():
    from spacy_pairatt.corpora.relation_metrics import semeval_sentence_counts

    with pytest.raises(ValueError, match="predicted label 'Cause-Effect' of sentence 1 is not a SemEval-2010"):
        semeval_sentence_counts(["Other", "Other"], ["Other", "Cause-Effect"])


def test_macro_f1_bootstrap_recovers_a_known_difference_over_seeds():
    """Under each of 3 seeds the better system is right on 200 more of 1,000 sentences than the worse."""
    from pairatt_paper.bootstrap import paired_bootstrap_macro_f1
    from spacy_pairatt.corpora.relation_metrics import semeval_official_scores

    rng = np.random.default_rng(1)
    gold = semeval_labels(rng, 1000)
    better, worse, expected = [], [], []
    for _ in range(3):
        wrong = semeval_labels(rng, 1000)
        right = rng.random(1000) < 0.5
        worse_labels = [g if r else w for g, w, r in zip(gold, wrong, right)]
        better_labels = [g if r or i < 200 else w for i, (g, w, r) in enumerate(zip(gold, wrong, right))]
        better.append({"gold": gold, "predicted": better_labels})
        worse.append({"gold": gold, "predicted": worse_labels})
        expected.append(
            100
            * (
                semeval_official_scores(gold, better_labels)["macro_f1"]
                - semeval_official_scores(gold, worse_labels)["macro_f1"]
            )
        )
    result = paired_bootstrap_macro_f1(better, worse, n_resamples=400, seed=0)
    assert result["by_seed"] == pytest.approx(expected) and result["difference"] == pytest.approx(np.mean(expected))
    assert 0 < result["low"] < result["difference"] < result["high"] and result["n_seeds"] == 3
    same = paired_bootstrap_macro_f1(worse, worse, n_resamples=100)
    assert (same["difference"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="same sentences"):
        paired_bootstrap_macro_f1(better[:1], [{"gold": gold[::-1], "predicted": gold}])
