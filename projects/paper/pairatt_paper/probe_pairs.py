"""A probe's rows: the layout of a pair feature row [T_i | T_j | a_ij | a_ji] (the classifier input of
the paper's eq. 5), the rows of given word pairs, and which pairs a probe is fitted and scored on."""

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from spacy_pairatt.layers.pair_batch import UnitFeatures

PARTS = ("T_i", "T_j", "a_ij", "a_ji")
ATTENTION_PARTS = ("a_ij", "a_ji")
DIRECTIONS = {"a_ij": "dependent->head", "a_ji": "head->dependent"}


@dataclass(frozen=True)
class PairFeatureLayout:
    """Columns of a pair feature row: [T_i (M) | T_j (M) | a_ij (L*H) | a_ji (L*H)].

    a_ij[l*H + h] is how much word i attends to word j in layer l, head h (0-based here).
    """

    width: int
    n_layers: int
    n_heads: int

    @property
    def n_attention(self) -> int:
        return self.n_layers * self.n_heads

    @property
    def sizes(self) -> Dict[str, int]:
        return {"T_i": self.width, "T_j": self.width, "a_ij": self.n_attention, "a_ji": self.n_attention}

    @property
    def n_columns(self) -> int:
        return sum(self.sizes.values())

    def part_of_columns(self) -> np.ndarray:
        """(n_columns,) the part name of every column."""
        return np.repeat(np.array(PARTS), [self.sizes[part] for part in PARTS])

    def index_in_part(self) -> np.ndarray:
        """(n_columns,) position of every column inside its part."""
        return np.concatenate([np.arange(self.sizes[part]) for part in PARTS])

    def columns(self, parts: Sequence[str]) -> np.ndarray:
        """Column indices of the given parts, in layout order."""
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise ValueError(f"Unknown pair feature parts {sorted(unknown)}; expected some of {PARTS}")
        return np.flatnonzero(np.isin(self.part_of_columns(), list(parts)))

    def names(self) -> List[str]:
        """'T_i_17' for embedding columns, 'a_ij_L3H5' (1-based) for attention columns (LightGBM
        takes no brackets)."""
        names = []
        for part, index in zip(self.part_of_columns().tolist(), self.index_in_part().tolist()):
            if part in ATTENTION_PARTS:
                layer, head = divmod(index, self.n_heads)
                names.append(f"{part}_L{layer + 1}H{head + 1}")
            else:
                names.append(f"{part}_{index}")
        return names


def pair_feature_matrix(features: UnitFeatures, dependents: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """(n_pairs, 2M + 2LH) float32 rows [T_i, T_j, a_ij, a_ji] for pairs (dependents[k], candidates[k]).

    Unit indices are those of `features`: 0 is the root ([CLS]), 1..n the words.
    """
    if features.attention is None:
        raise ValueError("Pair features need attention: the UnitFeatures were built without it")
    dependents = np.asarray(dependents, dtype="int64")
    candidates = np.asarray(candidates, dtype="int64")
    return np.concatenate(
        [
            features.hidden[dependents],
            features.hidden[candidates],
            features.attention[:, dependents, candidates].T,
            features.attention[:, candidates, dependents].T,
        ],
        axis=1,
    ).astype("float32", copy=False)


def sample_negatives(gold_heads: np.ndarray, per_word: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """(dependents, candidates): up to `per_word` wrong heads per word, drawn without replacement.

    gold_heads[w] is the unit of word w + 1's head (0 = root). A word's candidates are the root and
    the other words; its own gold head and itself are never drawn. Words are 1-based units.
    """
    if per_word < 0:
        raise ValueError(f"negatives per word must be >= 0, got {per_word}")
    gold_heads = np.asarray(gold_heads, dtype="int64")
    n_words = len(gold_heads)
    words = np.arange(1, n_words + 1)
    keys = rng.random((n_words, n_words + 1))
    keys[words - 1, words] = np.inf
    keys[words - 1, gold_heads] = np.inf
    drawn = np.argsort(keys, axis=1)[:, :per_word]
    valid = np.isfinite(np.take_along_axis(keys, drawn, axis=1))
    return np.broadcast_to(words[:, None], drawn.shape)[valid], drawn[valid]


def all_candidate_pairs(n_words: int) -> Tuple[np.ndarray, np.ndarray]:
    """(dependents, candidates) of every word with every other unit (root included)."""
    dependents, candidates = np.divmod(np.arange(n_words * (n_words + 1)), n_words + 1)
    dependents = dependents + 1
    keep = dependents != candidates
    return dependents[keep], candidates[keep]
