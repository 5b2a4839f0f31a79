"""Pictures: word-level attention maps with gold arcs or entities marked (the paper's Fig. 3 and 4),
the probe's gain per head, displaCy parses, and training curves from a `spacy train` log.

matplotlib is an optional extra (`pip install 'spacy-pairatt[viz]'`); figures are drawn on a
`matplotlib.figure.Figure`, never through pyplot's global state. Layers and heads are 1-based.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from spacy import displacy
from spacy.language import Language
from spacy.tokens import Doc

from .probe_pairs import ATTENTION_PARTS, DIRECTIONS, PairFeatureLayout
from .probing import INSTALL_HINT, encode, encoder_layout, frozen_encoder, gold_heads, read_conllu_docs

DPI = 100
CURVES_SIZE = (10.0, 4.0)
COLORBAR_LABEL = "attention weight (row word attending to column word)"
SEGMENTERS = {"sentencizer", "senter", "parser"}


@dataclass(frozen=True)
class MapSpec:
    """One attention map: layer and head (1-based) and the direction the marked arcs are read in.

    direction "a_ij" marks an arc at (row dependent, column head): the dependent attends to its
    head; "a_ji" marks (row head, column dependent).
    """

    layer: int
    head: int
    direction: str = "a_ij"

    @property
    def title(self) -> str:
        return f"layer {self.layer}, head {self.head}: {self.direction} ({DIRECTIONS[self.direction]})"

    @property
    def arcs_title(self) -> str:
        """Title of a map with gold arcs boxed: the head, its direction and where the boxes sit."""
        where = "row dependent, column head" if self.direction == "a_ij" else "row head, column dependent"
        return f"{self.title}\ngold arcs boxed at ({where})"

    @property
    def relation_title(self) -> str:
        """Title of a map with entities boxed: the head and the direction the probe chose it for."""
        return f"layer {self.layer}, head {self.head}: the probe's {self.direction} ({DIRECTIONS[self.direction]})"


def parse_map_specs(text: str) -> List[MapSpec]:
    """'3:5,2:1:a_ji' -> [MapSpec(3, 5, 'a_ij'), MapSpec(2, 1, 'a_ji')]."""
    specs = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(\d+):(\d+)(?::(a_ij|a_ji))?\s*", item)
        if match is None:
            raise ValueError(f"Attention map {item!r} is not LAYER:HEAD or LAYER:HEAD:a_ij|a_ji (1-based)")
        specs.append(MapSpec(int(match[1]), int(match[2]), match[3] or "a_ij"))
    return specs


def maps_from_probe(path: Path, n_maps: int = 2) -> List[MapSpec]:
    """The combined probe's n_maps most important (layer, head) pairs, each with its top direction."""
    result = json.loads(Path(path).read_text(encoding="utf8"))
    specs: List[MapSpec] = []
    for feature in result["probes"]["both"]["importance"]["top_attention"]:
        if all((spec.layer, spec.head) != (feature["layer"], feature["head"]) for spec in specs):
            specs.append(MapSpec(feature["layer"], feature["head"], feature["part"]))
    if len(specs) < n_maps:
        raise ValueError(f"{path} names {len(specs)} attention heads, {n_maps} wanted")
    return specs[:n_maps]


def check_maps(maps: Sequence[MapSpec], layout: PairFeatureLayout) -> None:
    for spec in maps:
        if not (1 <= spec.layer <= layout.n_layers and 1 <= spec.head <= layout.n_heads):
            raise ValueError(
                f"Attention map L{spec.layer}H{spec.head} is outside the encoder's "
                f"{layout.n_layers} layers x {layout.n_heads} heads (both 1-based)"
            )
        if spec.direction not in ATTENTION_PARTS:
            raise ValueError(f"Direction {spec.direction!r} is not one of {ATTENTION_PARTS}")


def word_attention_maps(attention: np.ndarray, maps: Sequence[MapSpec], n_heads: int) -> np.ndarray:
    """(len(maps), n, n) word-to-word attention (root dropped) from (L*H, n+1, n+1) unit attention."""
    rows = [(spec.layer - 1) * n_heads + spec.head - 1 for spec in maps]
    return attention[rows][:, 1:, 1:]


def arc_boxes(heads: np.ndarray, direction: str) -> np.ndarray:
    """(k, 4) one-cell boxes [row, row_end, column, column_end) of the arcs between two words.

    heads: gold_heads units (0 = root); root arcs have no cell among the words and are skipped.
    """
    dependents = np.flatnonzero(heads > 0)
    head_words = heads[dependents] - 1
    rows, columns = (dependents, head_words) if direction == "a_ij" else (head_words, dependents)
    return np.stack([rows, rows + 1, columns, columns + 1], axis=1)


def entity_boxes(first: Sequence[int], second: Sequence[int]) -> np.ndarray:
    """The blocks e1 x e2 and e2 x e1 of token (start, end) spans, as [row, row_end, column, column_end)."""
    return np.array([[*first, *second], [*second, *first]])


def require_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            f"Pictures need matplotlib, which is not installed: {INSTALL_HINT.format(extra='viz')}"
        ) from error
    return Figure


def save_figure(figure, output: Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, format="png", dpi=DPI)
    return output


def attention_figure_size(n_words: int, n_maps: int) -> Tuple[float, float]:
    """(width, height) in inches: about 0.28 inch per word, so every word label stays legible, and
    0.8 inch a map for its labelled colorbar."""
    side = max(4.0, 0.28 * n_words + 1.5)
    return (side + 0.8) * n_maps, side + 0.6


def plot_attention_maps(
    words: Sequence[str],
    matrices: np.ndarray,
    titles: Sequence[str],
    boxes: Sequence[np.ndarray],
    emphasised: Sequence[int],
    output: Path,
    caption: str = "",
) -> Path:
    """Heatmaps side by side, rows attending to columns, with boxes outlined and some words in red."""
    return save_figure(attention_maps_figure(words, matrices, titles, boxes, emphasised, caption), output)


def attention_maps_figure(
    words: Sequence[str],
    matrices: np.ndarray,
    titles: Sequence[str],
    boxes: Sequence[np.ndarray],
    emphasised: Sequence[int],
    caption: str = "",
):
    """The figure of `plot_attention_maps`, each colorbar labelled with what its colours measure."""
    from matplotlib.patches import Rectangle

    figure_class = require_figure()
    n_words = len(words)
    figure = figure_class(figsize=attention_figure_size(n_words, len(matrices)), layout="constrained")
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    for axis, matrix, title, map_boxes in zip(axes, matrices, titles, boxes):
        image = axis.imshow(matrix, cmap="Blues", vmin=0.0, interpolation="nearest")
        figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04).set_label(COLORBAR_LABEL, fontsize=9)
        for row, row_end, column, column_end in np.asarray(map_boxes).reshape(-1, 4):
            axis.add_patch(
                Rectangle(
                    (column - 0.5, row - 0.5), column_end - column, row_end - row, fill=False, edgecolor="red", lw=1.5
                )
            )
        axis.set_xticks(range(n_words), words, rotation=90, fontsize=8)
        axis.set_yticks(range(n_words), words, fontsize=8)
        for labels in (axis.get_xticklabels(), axis.get_yticklabels()):
            for index in emphasised:
                labels[index].set_color("red")
                labels[index].set_fontweight("bold")
        axis.set_xlabel("attended to")
        axis.set_ylabel("attending")
        axis.set_title(title, fontsize=10)
    if caption:
        figure.suptitle(caption, fontsize=10)
    return figure


def attention_picture(
    conllu: Path, sentence_index: int, maps: Sequence[MapSpec], output: Path, encoder: Optional[str] = None
) -> Path:
    """Fig. 3: the maps for sentence `sentence_index` (0-based) of a CoNLL-U file, gold arcs boxed."""
    docs = read_conllu_docs(conllu, sentence_index + 1)
    if sentence_index >= len(docs):
        raise ValueError(f"{conllu} has {len(docs)} sentences; sentence index {sentence_index} asked for")
    gold = docs[sentence_index]
    nlp = frozen_encoder(encoder)
    layout = encoder_layout(nlp)
    check_maps(maps, layout)
    doc, features = next(encode(nlp, [gold]))
    heads = gold_heads(doc)
    return plot_attention_maps(
        [token.text for token in doc],
        word_attention_maps(features.attention, maps, layout.n_heads),
        [spec.arcs_title for spec in maps],
        [arc_boxes(heads, spec.direction) for spec in maps],
        [],
        output,
        caption="Boxes: gold dependency arcs (root arcs not shown)",
    )


def semeval_sentence(path: Path, sentence_id: str) -> str:
    """The tagged text (<e1>..</e1>, <e2>..</e2>) of one example of a SemEval-2010 Task 8 file."""
    from spacy_pairatt.corpora.semeval import read_examples

    for example_id, tagged, _ in read_examples(Path(path)):
        if example_id == str(sentence_id):
            return tagged
    raise ValueError(f"No sentence {sentence_id} in {path}")


def relation_picture(tagged: str, maps: Sequence[MapSpec], output: Path, encoder: Optional[str] = None) -> Path:
    """Fig. 4: the maps for a sentence with <e1>..</e1> and <e2>..</e2>, entity tokens in red and
    the e1 x e2 and e2 x e1 blocks boxed."""
    from spacy_pairatt.corpora.relation_metrics import OTHER
    from spacy_pairatt.corpora.semeval import make_example_doc
    from spacy_pairatt.integration.extensions import register_extensions

    register_extensions()
    nlp = frozen_encoder(encoder)
    layout = encoder_layout(nlp)
    check_maps(maps, layout)
    doc, features = next(encode(nlp, [make_example_doc(nlp, "0", tagged, OTHER)]))
    e1, e2 = ((ent.start, ent.end) for ent in doc.ents)
    return plot_attention_maps(
        [token.text for token in doc],
        word_attention_maps(features.attention, maps, layout.n_heads),
        [f"{spec.relation_title}\nboxed: e1 rows x e2 columns, e2 rows x e1 columns" for spec in maps],
        [entity_boxes(e1, e2)] * len(maps),
        [*range(*e1), *range(*e2)],
        output,
        caption="Red: the two entities; boxes: e1 attending to e2 and e2 attending to e1",
    )


def plot_attention_gain(importance: Dict, output: Path) -> Path:
    """Two heatmaps (a_ij, a_ji) of each head's share of the probe's attention gain, layers x heads."""
    figure_class = require_figure()
    grids = np.array([importance["attention_gain_grid"][part] for part in ATTENTION_PARTS])
    shares = grids / max(grids.sum(), np.finfo("float64").tiny)
    n_layers, n_heads = grids.shape[1:]
    figure = figure_class(figsize=(2 * (0.45 * n_heads + 1.5), 0.45 * n_layers + 1.2), layout="constrained")
    axes = figure.subplots(1, 2)
    for axis, grid, part in zip(axes, shares, ATTENTION_PARTS):
        image = axis.imshow(100 * grid, cmap="Reds", vmin=0.0)
        figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04, label="% of attention gain")
        axis.set_xticks(range(n_heads), range(1, n_heads + 1), fontsize=8)
        axis.set_yticks(range(n_layers), range(1, n_layers + 1), fontsize=8)
        axis.set_xlabel("head")
        axis.set_ylabel("layer")
        axis.set_title(f"{part}: {DIRECTIONS[part]}", fontsize=10)
    return save_figure(figure, output)


def load_parser(model: str) -> Language:
    """spacy.load(model), with a sentencizer in front when it has no segmenter (as `demo` does)."""
    import spacy

    nlp = spacy.load(model)
    if not SEGMENTERS & set(nlp.pipe_names):
        nlp.add_pipe("sentencizer", first=True)
    return nlp


def displacy_markup(nlp: Language, texts: Sequence[str], page: bool = True) -> str:
    """displaCy markup of the pipeline's parses: an HTML page, or one SVG (page False, one text)."""
    if not page and len(texts) != 1:
        raise ValueError(f"An SVG holds one parse; {len(texts)} texts given (write an .html page instead)")
    docs: List[Doc] = list(nlp.pipe(texts))
    return displacy.render(docs if page else docs[0], style="dep", page=page, jupyter=False)


def parse_training_log(text: str) -> Dict[str, np.ndarray]:
    """The last results table of a `spacy train` console log, one float array per column.

    The table is the header line, a line of dashes marking each column, then one row of numbers
    per evaluation; column names are read under the dashes. spaCy cuts long names ('LOSS TRANS...'):
    where the log names its pipeline ("Pipeline: ['transformer', ...]") and one component fits the
    cut name, the loss column takes the component's name ('LOSS transformer').
    """
    lines = text.splitlines()
    pipeline = training_log_pipeline(text)
    tables = []
    for number in range(1, len(lines)):
        dashes = list(re.finditer(r"-+", lines[number]))
        if len(dashes) < 2 or lines[number].replace("-", "").strip():
            continue
        names = [full_column_name(lines[number - 1][m.start() : m.end()].strip(), pipeline) for m in dashes]
        rows = []
        for line in lines[number + 1 :]:
            values = line.split()
            if len(values) != len(names) or not all(re.fullmatch(r"-?\d+(\.\d+)?", value) for value in values):
                break
            rows.append([float(value) for value in values])
        if rows:
            tables.append(dict(zip(names, np.array(rows).T)))
    if not tables:
        raise ValueError("No `spacy train` results table (header, dashes, rows of numbers) in the log")
    return tables[-1]


def training_log_pipeline(text: str) -> List[str]:
    """The component names of the log's "Pipeline: [...]" line ([] when there is none)."""
    match = re.search(r"Pipeline: \[([^\]]*)\]", text)
    return re.findall(r"'([^']+)'", match[1]) if match else []


def full_column_name(name: str, pipeline: Sequence[str]) -> str:
    """'LOSS PAIRA...' -> 'LOSS pairatt_parser' when exactly one component of `pipeline` starts so."""
    match = re.fullmatch(r"LOSS (.+)\.\.\.", name)
    if match is None:
        return name
    fits = [component for component in pipeline if component.upper().startswith(match[1])]
    return f"LOSS {fits[0]}" if len(fits) == 1 else name


def plot_training_curves(table: Dict[str, np.ndarray], output: Path, title: str = "") -> Path:
    """Losses and dev scores (every column but E, # and SCORE) against the step column '#'."""
    return save_figure(training_curves_figure(table, title), output)


def training_curves_figure(table: Dict[str, np.ndarray], title: str = ""):
    """The figure of `plot_training_curves`: one legend entry per column, named in full."""
    if "#" not in table:
        raise ValueError(f"The training table has no '#' (step) column: {sorted(table)}")
    figure_class = require_figure()
    steps = table["#"]
    losses = [name for name in table if name.startswith("LOSS")]
    scores = [name for name in table if name not in {"E", "#", "SCORE", *losses}]
    figure = figure_class(figsize=CURVES_SIZE, layout="constrained")
    loss_axis, score_axis = figure.subplots(1, 2)
    for axis, names, label in (
        (loss_axis, losses, "loss since the last evaluation"),
        (score_axis, scores, "dev score"),
    ):
        for name in names:
            axis.plot(steps, table[name], marker="o", label=curve_label(name))
        axis.set_xlabel("step")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


SCORE_LABELS = {"DEP_UAS": "UAS", "DEP_LAS": "LAS", "SENTS_F": "sentence F", "TAG_ACC": "tag accuracy"}


def curve_label(name: str) -> str:
    """'LOSS pairatt_parser' -> 'pairatt_parser loss', 'DEP_UAS' -> 'UAS', others in spaCy's lower case."""
    if name.startswith("LOSS "):
        return f"{name[5:]} loss"
    return SCORE_LABELS.get(name, name.lower())


def picture_caption(mode: str, maps: Sequence[MapSpec], source: str) -> str:
    """'Attention maps L3H5 (a_ij), L2H1 (a_ji) of <source>: <what is marked>'."""
    marked = {"attention": "gold dependency arcs boxed", "relation": "entities in red, e1 x e2 blocks boxed"}[mode]
    heads = ", ".join(f"L{spec.layer}H{spec.head} ({spec.direction})" for spec in maps)
    return f"Attention maps {heads} of {source}: {marked}"


def report_picture(report: Path, marker: str, output: Path, caption: str, command: str) -> None:
    """Put a picture, its caption and the command that drew it into a marked block of a markdown file."""
    from os.path import relpath

    from spacy_pairatt.reporting.tables import replace_marked_block

    report = Path(report)
    link = relpath(Path(output).resolve(), report.resolve().parent)
    block = f"![{caption}]({link})\n\n*{caption}* (`{link}`), drawn by:\n\n```bash\n{command}\n```\n"
    report.write_text(replace_marked_block(report.read_text(encoding="utf8"), marker, block), encoding="utf8")
