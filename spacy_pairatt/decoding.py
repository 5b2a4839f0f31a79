"""Dependency-tree decoding from arc score matrices (pure numpy).

Conventions shared by every function here:

* A sentence of ``n`` words is scored by a float matrix ``scores`` of shape
  ``(n + 1, n + 1)``.  Row ``i`` is the *dependent*, column ``j`` the
  candidate *head*; index 0 is the artificial ROOT and words are ``1..n``.
  ``scores[i, j]`` is the log-score of the arc ``j -> i``.
* Row 0 (the root's own head) and the diagonal are ignored.  ``-inf`` marks a
  disallowed arc; NaN and ``+inf`` are rejected.
* Decoders return an ``int64`` array ``heads`` of length ``n + 1`` with
  ``heads[0] == -1`` (the root has no head) and ``heads[i] in 0..n`` for words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .validation import head_array_problem

ROOT_HEAD = -1
"""Value stored in ``heads[0]``: the artificial root has no head."""


def _arc_scores(scores: np.ndarray) -> np.ndarray:
    """Validate ``scores`` and return a float64 copy with unusable arcs at -inf.

    Row 0 and the diagonal are set to ``-inf`` so that every decoder can take
    plain row-wise maxima.  Only the arcs that are actually used are checked
    for NaN / ``+inf``, since the rest is documented as ignored.
    """
    arr = np.array(scores, dtype=np.float64, copy=True)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"scores must be a non-empty square (n+1, n+1) matrix, got shape {arr.shape}")
    arr[0, :] = -np.inf
    np.fill_diagonal(arr, -np.inf)
    if np.isnan(arr).any():
        raise ValueError("scores contains NaN arc scores")
    if np.isposinf(arr).any():
        raise ValueError("scores contains +inf arc scores; use -inf for disallowed arcs")
    return arr


def _best_heads(arc_scores: np.ndarray) -> np.ndarray:
    """Row-wise argmax of an already masked matrix; node 0 points to itself.

    The root self-loop makes the root a fixed point, which keeps the
    functional-graph helpers below simple.
    """
    heads = np.argmax(arc_scores, axis=1).astype(np.int64, copy=False)
    heads[0] = 0
    return heads


def _reach_root(parents: np.ndarray) -> np.ndarray:
    """Follow parent pointers at least ``len - 1`` steps by pointer jumping.

    ``parents[0]`` must be 0.  log2(len) rounds of ``jumped[jumped]``; the
    result is where each node ends up, which is 0 iff the node reaches the root
    and otherwise a node lying on a cycle.
    """
    jumped = parents
    for _ in range(parents.shape[0].bit_length()):
        jumped = jumped[jumped]
    return jumped


def _cycles(heads: np.ndarray) -> list[np.ndarray]:
    """All cycles of the functional graph ``heads`` (with ``heads[0] == 0``).

    Pointer jumping finds every node lying on a cycle at once; the cycles are
    then read off by walking them, which costs only their total length.
    """
    on_cycle = np.zeros(heads.shape[0], dtype=bool)
    on_cycle[_reach_root(heads)] = True
    on_cycle[0] = False
    cycles = []
    for start in np.flatnonzero(on_cycle):
        if not on_cycle[start]:
            continue
        cycle = [start]
        node = heads[start]
        while node != start:
            cycle.append(node)
            node = heads[node]
        on_cycle[cycle] = False
        cycles.append(np.array(cycle, dtype=np.int64))
    return cycles


class _Contraction(NamedTuple):
    """What is needed to undo the contraction of one cycle."""

    cycle: np.ndarray  # members; cycle[0] represents the contracted node
    cycle_heads: np.ndarray  # greedy head of each member inside the cycle
    entry_dep: np.ndarray  # per outside head h: member that h would attach to
    exit_head: np.ndarray  # per outside dependent i: member that would head i
    outside: np.ndarray  # bool mask of live nodes outside the cycle


def _contract(scores: np.ndarray, heads: np.ndarray, alive: np.ndarray, cycle: np.ndarray) -> _Contraction:
    """Contract ``cycle`` into its first member, updating everything in place.

    An arc entering the cycle is scored relative to the cycle arc it breaks;
    an arc leaving it takes the best member as head.  The other members are
    killed (their rows and columns set to -inf, their heads to 0) and the
    greedy heads stay valid argmaxes, so only the representative's head needs
    recomputing: O(m * |cycle|) work instead of rebuilding the matrix.
    """
    rep, others = cycle[0], cycle[1:]
    outside = alive.copy()
    outside[cycle] = False
    cycle_heads = heads[cycle].copy()
    entering = scores[cycle] - scores[cycle, cycle_heads][:, None]
    entering[:, ~outside] = -np.inf
    leaving = scores[:, cycle]
    record = _Contraction(cycle, cycle_heads, cycle[entering.argmax(axis=0)], cycle[leaving.argmax(axis=1)], outside)
    scores[rep] = entering.max(axis=0)
    scores[:, rep] = leaving.max(axis=1)
    scores[rep, rep] = -np.inf
    scores[others] = -np.inf
    scores[:, others] = -np.inf
    alive[others] = False
    in_cycle = np.zeros_like(alive)
    in_cycle[cycle] = True
    heads[outside & in_cycle[heads]] = rep
    heads[others] = 0
    heads[rep] = scores[rep].argmax()
    return record


def _chu_liu_edmonds(arc_scores: np.ndarray) -> np.ndarray:
    """Maximum spanning arborescence rooted at 0 of a masked score matrix.

    Chu-Liu/Edmonds without recursion: take greedy heads; while they contain
    cycles, contract each cycle in place (see ``_contract``).  Once the greedy
    heads form a tree, undo the contractions in reverse order: dependents of
    a contracted node get back the member that was their best head, and the
    cycle keeps all its arcs except the one into the member where the chosen
    entering arc lands.
    """
    scores = arc_scores.copy()
    alive = np.ones(scores.shape[0], dtype=bool)
    heads = _best_heads(scores)
    contractions = []
    cycles = _cycles(heads)
    while cycles:
        contractions.extend(_contract(scores, heads, alive, cycle) for cycle in cycles)
        cycles = _cycles(heads)

    for cycle, cycle_heads, entry_dep, exit_head, outside in reversed(contractions):
        entry_head = heads[cycle[0]]
        redirected = outside & (heads == cycle[0])
        heads[redirected] = exit_head[redirected]
        heads[cycle] = cycle_heads
        heads[entry_dep[entry_head]] = entry_head
    return heads


def greedy_heads(scores: np.ndarray) -> np.ndarray:
    """Best head for every word independently (may contain cycles / several roots).

    This is the cheap decoder used during training, where well-formedness is
    not required.
    """
    heads = _best_heads(_arc_scores(scores))
    heads[0] = ROOT_HEAD
    return heads


def mst_heads(scores: np.ndarray) -> np.ndarray:
    """Highest-scoring non-projective tree with exactly one word attached to ROOT.

    Single-rootedness is enforced by subtracting from every root arc a
    constant larger than the spread of any two trees' scores, so every tree
    with several root children loses to every single-root tree; the constant
    cancels out among single-root trees.  Raises ValueError for malformed
    scores and when no single-rooted tree with finite score exists.
    """
    arc_scores = _arc_scores(scores)
    n = arc_scores.shape[0] - 1
    if n == 0:
        return np.array([ROOT_HEAD], dtype=np.int64)
    greedy = _best_heads(arc_scores)
    if _is_finite_single_rooted_tree(arc_scores, greedy):
        # Every word already has its best head: no tree scores higher (a trained model's usual case).
        greedy[0] = ROOT_HEAD
        return greedy
    finite = arc_scores[np.isfinite(arc_scores)]
    if finite.size == 0:
        raise ValueError("no single-rooted tree exists: every arc is disallowed (-inf)")
    penalty = 1.0 + n * (float(finite.max()) - float(finite.min()))
    if not np.isfinite(penalty):
        raise ValueError("score range too large to enforce a single root numerically")
    arc_scores[:, 0] -= penalty
    heads = _chu_liu_edmonds(arc_scores)
    heads[0] = ROOT_HEAD
    if not np.isfinite(arc_scores[np.arange(1, n + 1), heads[1:]]).all():
        raise ValueError("no tree exists: the allowed (finite) arcs cannot span all words")
    if np.count_nonzero(heads[1:] == 0) != 1:
        raise ValueError("no single-rooted tree exists with the allowed (finite) arcs")
    return heads


def _is_finite_single_rooted_tree(arc_scores: np.ndarray, heads: np.ndarray) -> bool:
    """Whether ``heads`` (``heads[0] == 0``) uses allowed arcs only, has one root child and no cycle."""
    words = np.arange(1, heads.shape[0])
    return (
        np.count_nonzero(heads[1:] == 0) == 1
        and bool(np.isfinite(arc_scores[words, heads[1:]]).all())
        and not _reach_root(heads).any()
    )


def tree_score(scores: np.ndarray, heads: np.ndarray) -> float:
    """Total log-score of the arcs chosen by ``heads`` (words 1..n only)."""
    scores = np.asarray(scores)
    heads = np.asarray(heads)
    words = np.arange(1, heads.shape[0])
    return float(scores[words, heads[1:]].sum())


def is_single_rooted_tree(heads: np.ndarray) -> bool:
    """Whether ``heads`` (``heads[0]`` ignored) is one tree with a single ROOT child.

    Requires integer heads in ``0..n``, no self-loops, exactly one word headed
    by 0 and every word reaching 0 (no cycles): `validation.head_array_problem`.
    The empty sentence (n = 0) counts as a valid tree so that every ``mst_heads``
    output passes.
    """
    heads = np.asarray(heads)
    if heads.ndim != 1 or heads.size == 0 or not np.issubdtype(heads.dtype, np.integer):
        return False
    return heads.size == 1 or head_array_problem(heads[1:]) is None


_DECODERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mst": mst_heads,
    "greedy": greedy_heads,
}
DECODERS = tuple(_DECODERS)


def decode_heads(scores: np.ndarray, method: str) -> np.ndarray:
    """Decode heads with the named method ("mst" or "greedy")."""
    try:
        decoder = _DECODERS[method]
    except KeyError:
        raise ValueError(f"unknown decoding method {method!r}; allowed: {sorted(_DECODERS)}") from None
    return decoder(scores)
