"""The paired bootstrap over documents: on counts where the answer is known."""

import numpy as np
import pytest

from spacy_pairatt.bootstrap import f_score, paired_bootstrap


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
