"""The segmenter on raw text, scored as ud-eval scores a parse (Tokens, Words and Sentences F1),
and the sweep of its threshold that picks the setting on dev (`segmenter-sweep`).

Tokens and sentences depend only on the tokenizer and the segmenter, so a pipeline of those two
scores exactly what a whole pipeline with the same two would on these metrics, in seconds.
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from thinc.api import Model

from ..components.segmenter import sentence_starts
from ..corpora.ud_documents import paragraph_starts, raw_text, read_ud_documents
from ..integration.load_settings import set_setting
from ..layers.ensemble import first_members
from ..parse_files.reading import SourceDoc
from ..parse_files.writing import conllu_blocks
from ..runs.scratch import replace_pipeline_folder
from .ud_errors import boundary_errors
from .ud_eval import evaluate
from .ud_treebank import load_conllu, read_treebank

SEGMENTATION_METRICS = ("Tokens", "Words", "Sentences")


def segmenter_name(nlp: Language) -> str:
    """The name of the pipeline's one pairatt_segmenter; ValueError where there is none or several."""
    names = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == "pairatt_segmenter"]
    if len(names) != 1:
        raise ValueError(
            f"the pipeline has {len(names)} pairatt_segmenter components (its components: {nlp.pipe_names}), not 1"
        )
    return names[0]


def threshold_sweep(
    nlp: Language,
    gold_path: str,
    thresholds: Sequence[float],
    members: Optional[Sequence[int]] = None,
    batch_size: int = 64,
) -> Dict:
    """Tokens, Words and Sentences F1 (and boundary errors by kind) of the pipeline's tokenizer and
    pairatt_segmenter on the raw text of gold_path (a paragraph a Doc, as `parse` reads ud-text's
    file), at each threshold and, with `members`, for each count of its ensemble's first members
    kept (`first_members`); `best` is the row with the highest Sentences F1 (the fewest members,
    then the lowest threshold, of a tie). The components before the segmenter run once; each
    threshold decides on the same probabilities."""
    name = segmenter_name(nlp)
    segmenter = nlp.get_pipe(name)
    models = {count: first_members(segmenter.model, count) for count in members} if members else {None: segmenter.model}
    lines = Path(gold_path).read_text(encoding="utf8").splitlines()
    texts = [line for line in raw_text(lines).splitlines() if line]
    paragraphs = paragraph_starts(read_ud_documents(lines))
    gold = load_conllu(gold_path)
    docs = [source_doc(nlp, number, text) for number, text in enumerate(texts, 1)]
    probabilities = pipeline_start_probabilities(nlp, name, docs, batch_size, list(models.values()))
    rows = []
    for count, model_probabilities in zip(models, probabilities):
        for threshold in thresholds:
            blocks = []
            for doc, doc_probabilities in zip(docs, model_probabilities):
                segmented = doc.copy()
                segmenter.set_annotations([segmented], [sentence_starts(segmented, doc_probabilities, threshold)])
                blocks.append(conllu_blocks(segmented))
            system = read_treebank("".join(blocks).splitlines(), "segmented")
            scores = evaluate(gold, system)
            errors = boundary_errors(gold, system, top=0, paragraph_starts=paragraphs)
            rows.append(
                {
                    **({"members": count} if count else {}),
                    "threshold": threshold,
                    **{metric: round(100 * scores[metric].f1, 2) for metric in SEGMENTATION_METRICS},
                    "missed": {kind: value["count"] for kind, value in errors["missed"]["kinds"].items()},
                    "false": {kind: value["count"] for kind, value in errors["false"]["kinds"].items()},
                }
            )
    best = best_row(rows)
    chosen = {"best": best["threshold"], **({"best_members": best["members"]} if "members" in best else {})}
    return {"gold": gold_path, "rows": rows, **chosen}


def best_row(rows: List[Dict]) -> Dict:
    """The row with the highest Sentences F1; of a tie, the fewest members, then the lowest threshold."""
    return max(rows, key=lambda row: (row["Sentences"], -row.get("members", 0), -row["threshold"]))


def pipeline_start_probabilities(
    nlp: Language, name: str, docs: List[Doc], batch_size: int, models: List[Model]
) -> List[List[np.ndarray]]:
    """For each of `models` in the segmenter `name`'s place, its probability of a sentence start for
    each token of each Doc, after the components before it (a transformer it listens to) ran on a
    copy, batch by batch."""
    segmenter = nlp.get_pipe(name)
    before = nlp.pipe_names[: nlp.pipe_names.index(name)]
    probabilities: List[List[np.ndarray]] = [[] for _ in models]
    for start in range(0, len(docs), batch_size):
        with nlp.select_pipes(enable=before):
            batch = list(nlp.pipe((doc.copy() for doc in docs[start : start + batch_size]), batch_size=batch_size))
        for model, model_probabilities in zip(models, probabilities):
            model_probabilities.extend(segmenter.start_probabilities(batch, model))
    return probabilities


def source_doc(nlp: Language, number: int, text: str) -> Doc:
    """The tokenised Doc `parse` makes of the input's line `number`."""
    return SourceDoc(id=str(number), line=number, offset=0, text=text).to_doc(nlp)


def store_threshold(nlp: Language, model: Path, threshold: float, members: Optional[int] = None) -> None:
    """Save the pipeline at `model` again with its segmenter's threshold set and, given `members`, its
    ensemble cut to its first `members` (the weights of the others dropped), swapped in in one step."""
    name = segmenter_name(nlp)
    set_setting(nlp, name, "threshold", threshold)
    if members:
        segmenter = nlp.get_pipe(name)
        segmenter.model = first_members(segmenter.model, members)
        nlp.get_pipe_config(name)["model"]["members"] = members
    replace_pipeline_folder(model, nlp.to_disk)


def sweep_markdown(sweep: Dict, title: str) -> str:
    """The sweep's rows as a table; with several member counts, each count's best row (every row is in
    the JSON)."""
    counts = sorted({row["members"] for row in sweep["rows"] if "members" in row})
    best = f"**{sweep['best']}**" + (f" with {sweep['best_members']} member(s)" if counts else "")
    rows = sweep["rows"]
    if len(counts) > 1:
        rows = [best_row([row for row in rows if row["members"] == count]) for count in counts]
    lines = [
        title,
        "",
        f"Pipeline `{sweep['model']}`, raw text of `{sweep['gold']}` (a paragraph a Doc). Best: {best}.",
        *(("", "Each member count's best threshold (every threshold's row is in the JSON).") if counts[1:] else ()),
        "",
        "| " + ("members | " if counts else "") + "threshold | Tokens F1 | Words F1 | Sentences F1 | missed | false |",
        "|---|" + ("---|" if counts else "") + "---|---|---|---|---|",
    ]
    for row in rows:
        missed, false = sum(row["missed"].values()), sum(row["false"].values())
        scores = " | ".join(f"{row[metric]:.2f}" for metric in SEGMENTATION_METRICS)
        members = f"{row['members']} | " if counts else ""
        lines.append(f"| {members}{row['threshold']} | {scores} | {missed} | {false} |")
    return "\n".join(lines) + "\n"
