"""Relations between spans, stored on the Doc as `doc._.relations`.

Each relation is directional (head -> tail), labelled and scored. Spans are kept as token offsets,
not Span objects, in `doc.user_data`, so relations survive `DocBin(store_user_data=True)`,
`Doc.to_disk`/`from_disk`, `to_bytes` and pickling with no custom serialisation.

Candidate *entities* are read from `doc.ents` or `doc.spans[key]`. Spans that share a
`span.id_` are mentions of one entity (document-level data such as DocRED); a span without an
id is an entity of its own. A relation between entities is stored with each entity's first
mention as its offsets.
"""

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from spacy.tokens import Doc, Span

USER_DATA_KEY = "pairatt_relations"
ENTS = "ents"  # the spans_key value that means doc.ents


@dataclass(frozen=True, order=True)
class Relation:
    """head and tail are (start, end) token offsets of a span of the Doc; score is in [0, 1]."""

    head: Tuple[int, int]
    tail: Tuple[int, int]
    label: str
    score: float = 1.0

    def head_span(self, doc: Doc) -> Span:
        return doc[self.head[0] : self.head[1]]

    def tail_span(self, doc: Doc) -> Span:
        return doc[self.tail[0] : self.tail[1]]

    def to_tuple(self) -> Tuple[int, int, int, int, str, float]:
        return (*self.head, *self.tail, self.label, float(self.score))


RelationLike = Union[Relation, Sequence]


def _as_relation(value: RelationLike, doc: Doc) -> Relation:
    """A Relation from a Relation, a (head, tail, label[, score]) or a flat stored tuple; checked against doc."""
    if isinstance(value, Relation):
        relation = value
    elif len(value) == 6:
        h_start, h_end, t_start, t_end, label, score = value
        relation = Relation((int(h_start), int(h_end)), (int(t_start), int(t_end)), str(label), float(score))
    elif len(value) in (3, 4):
        head, tail = (_offsets(value[0]), _offsets(value[1]))
        relation = Relation(head, tail, str(value[2]), float(value[3]) if len(value) == 4 else 1.0)
    else:
        raise ValueError(f"doc._.relations: cannot read {value!r} as a relation (head, tail, label[, score])")
    for name, (start, end) in (("head", relation.head), ("tail", relation.tail)):
        if not 0 <= start < end <= len(doc):
            raise ValueError(_misfit(doc, name, start, end, relation.label))
    return relation


def _misfit(doc: Doc, name: str, start: int, end: int, label: str) -> str:
    return (
        f"doc._.relations: {name} span [{start}, {end}) of relation {label!r} does not fit "
        f"the Doc of {len(doc)} tokens ({doc.text[:60]!r})"
    )


def _offsets(span) -> Tuple[int, int]:
    if isinstance(span, Span):
        return span.start, span.end
    start, end = span
    return int(start), int(end)


def get_relations(doc: Doc) -> List[Relation]:
    return [_as_relation(stored, doc) for stored in doc.user_data.get(USER_DATA_KEY, ())]


def set_relations(doc: Doc, relations: Optional[Iterable[RelationLike]]) -> None:
    """Store relations as plain tuples, sorted (head, tail, label) so the order is deterministic."""
    checked = sorted(_as_relation(value, doc) for value in (relations or ()))
    doc.user_data[USER_DATA_KEY] = [relation.to_tuple() for relation in checked]


def set_relation_arrays(
    doc: Doc, heads: np.ndarray, tails: np.ndarray, label_ids: np.ndarray, scores: np.ndarray, labels: Sequence[str]
) -> None:
    """`set_relations` for a component's predictions as arrays, stored the same way without a Python
    object per relation on the way (a Doc of 1,000 entities can have a million):
    heads, tails (R, 2) token offsets; label_ids (R,) indices into `labels`; scores (R,)."""
    heads, tails = (np.asarray(offsets, dtype="int64").reshape(-1, 2) for offsets in (heads, tails))
    label_ids, scores = np.asarray(label_ids, dtype="int64"), np.asarray(scores)
    for name, offsets in (("head", heads), ("tail", tails)):
        starts, ends = offsets.T
        misfits = np.flatnonzero(~((starts >= 0) & (starts < ends) & (ends <= len(doc))))
        if len(misfits):
            start, end = offsets[misfits[0]].tolist()
            raise ValueError(_misfit(doc, name, start, end, labels[label_ids[misfits[0]]]))
    label_rank = np.argsort(np.argsort(np.array(labels, dtype=str)))
    order = np.lexsort((scores, label_rank[label_ids], tails[:, 1], tails[:, 0], heads[:, 1], heads[:, 0]))
    names = np.array(labels, dtype=object)[label_ids[order]].tolist()
    columns = (*heads[order].T.tolist(), *tails[order].T.tolist(), names, scores[order].tolist())
    doc.user_data[USER_DATA_KEY] = list(zip(*columns))


def register_relations_extension() -> None:
    """`doc._.relations` alone, idempotent (`register_extensions` registers it with the others)."""
    if not Doc.has_extension("relations"):
        Doc.set_extension("relations", getter=get_relations, setter=set_relations)


def candidate_spans(doc: Doc, spans_key: str) -> List[Span]:
    """The spans relations may hold between: doc.ents for "ents", else doc.spans[spans_key]."""
    if spans_key == ENTS:
        return list(doc.ents)
    return list(doc.spans[spans_key]) if spans_key in doc.spans else []


def entity_mentions(spans: Iterable[Span]) -> List[List[Span]]:
    """Spans grouped into entities by `span.id_` (no id: an entity of its own), in order of first mention."""
    groups: Dict[str, List[Span]] = {}
    for position, span in enumerate(sorted(spans, key=lambda s: (s.start, s.end))):
        groups.setdefault(span.id_ or f"\0{position}", []).append(span)
    return list(groups.values())


def distinct_entities(spans: Iterable[Span]) -> List[List[Span]]:
    """`entity_mentions` of the spans with identical offsets taken as one span.

    A span listed twice in `doc.spans` is one candidate, so no relation goes from an entity to
    itself. Of copies with different ids the first with an id is kept (an entity left with no
    mention of its own drops out): relations are stored by offsets, so such entities could not be
    told apart in `doc._.relations` anyway.
    """
    by_offsets: Dict[Tuple[int, int], Span] = {}
    for span in spans:
        kept = by_offsets.get((span.start, span.end))
        if kept is None or (span.id_ and not kept.id_):
            by_offsets[span.start, span.end] = span
    return entity_mentions(by_offsets.values())


def render_relations(doc: Doc, spans_key: str = ENTS, page: bool = False) -> str:
    """displaCy's "dep" view of `doc._.relations`: one arc per relation, from the head span's first
    token to the tail span's (its last token when both start together), pointing at the tail;
    tokens of candidate spans show the span label underneath. Returns SVG (HTML with page=True)."""
    from spacy import displacy

    tags = [""] * len(doc)
    for span in candidate_spans(doc, spans_key):
        for i in range(span.start, span.end):
            tags[i] = span.label_
    arcs = []
    for relation in get_relations(doc):
        start = relation.head[0]
        end = relation.tail[0] if relation.tail[0] != start else relation.tail[1] - 1
        if end == start:
            raise ValueError(f"render_relations: {relation.label!r} goes from a one-token span to itself")
        direction = "right" if start < end else "left"
        arcs.append({"start": min(start, end), "end": max(start, end), "label": relation.label, "dir": direction})
    words = [{"text": token.text, "tag": tag} for token, tag in zip(doc, tags)]
    return displacy.render({"words": words, "arcs": arcs}, style="dep", manual=True, page=page, jupyter=False)
