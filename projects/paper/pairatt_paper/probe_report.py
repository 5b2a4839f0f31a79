"""The probe's report: results/probe.json and results/probe.md (docs/probing.md)."""

import os
from pathlib import Path
from typing import Dict, Optional

from spacy_pairatt.reporting.json_files import write_json
from spacy_pairatt.reporting.provenance import library_versions, provenance

# Marked blocks of results/probe.md that `visualize attention|relation --report` fill in.
PICTURE_BLOCKS = {"attention-maps": "attention", "relation-maps": "relation"}
IMPORTANCE_CAPTION = "Combined probe: gain of each attention head's features, per direction"


def probe_markdown(result: Dict, command: str, importance_png: Optional[str] = None) -> str:
    """results/probe.md: the UAS table, the importance summary and the command.

    importance_png: the gain-per-head figure, relative to the markdown file. The pictures drawn
    by `visualize attention|relation --report` go into the PICTURE_BLOCKS marked blocks.
    """
    both = result["probes"]["both"]["importance"]
    data = result["data"]
    lines = [
        "# Probing the frozen encoder's pair-wise attention",
        "",
        f"Encoder: `{result['encoder']}` ({result['layout']['layers']} layers x "
        f"{result['layout']['heads']} heads, hidden {result['layout']['hidden']}), not fine-tuned. "
        f"Train: {data['train']['sentences']} sentences of `{Path(data['train']['path']).name}` "
        f"({data['train']['gold_pairs']} gold arcs + {result['settings']['negatives_per_word']} sampled non-arcs per "
        f"word, {data['train']['pairs']} pairs); eval: {data['eval']['sentences']} sentences of "
        f"`{Path(data['eval']['path']).name}` ({data['eval']['words']} words, every candidate head: "
        f"{data['eval']['pairs']} pairs). LightGBM, {result['settings']['rounds']} rounds. "
        "See docs/probing.md for what is measured.",
        "",
        "| probe | features | eval UAS (argmax head, no punct.) |",
        "|---|---:|---:|",
    ]
    for name, probe in result["probes"].items():
        lines.append(f"| {name} ({', '.join(probe['parts'])}) | {probe['n_features']} | {100 * probe['uas']:.1f} |")
    share = both["top_k_attention_share"]
    lines += [
        "",
        "Clark et al. (2019) report about 78 UAS for an attention + GloVe probe on BERT-base (WSJ).",
        "",
        f"**Combined probe:** {both['top_k_attention']} of the {both['top_k']} most important features (by gain) "
        f"are attention weights ({'–' if share is None else f'{100 * share:.0f}%'}; the paper: all 100); "
        f"attention features carry {100 * both['attention_gain_share']:.1f}% of the total gain.",
        "",
        "Top 20 attention features of the combined probe (layers and heads 1-based; a_ij: the dependent "
        "attends to the head, a_ji: the head attends to the dependent):",
        "",
        "| rank | feature | layer | head | direction | gain share |",
        "|---:|---|---:|---:|---|---:|",
    ]
    for rank, feature in enumerate(both["top_attention"], start=1):
        lines.append(
            f"| {rank} | `{feature['feature']}` | {feature['layer']} | {feature['head']} | "
            f"{feature['direction']} | {100 * feature['gain_share']:.2f}% |"
        )
    seconds = result["seconds"]
    lines += [
        "",
        f"Feature extraction took {seconds['features']} s, everything {seconds['total']} s. Made with:",
        "",
        "```bash",
        command,
        "```",
        "",
        "## Pictures",
        "",
    ]
    if importance_png:
        lines += [
            f"![{IMPORTANCE_CAPTION}]({importance_png})",
            "",
            f"*{IMPORTANCE_CAPTION}* (`{importance_png}`, written by the command above)",
            "",
        ]
    for marker, what in PICTURE_BLOCKS.items():
        lines += [
            f"<!-- {marker}:start -->",
            f"Not drawn yet: `python -m pairatt_paper visualize {what} ... --report THIS_FILE`",
            f"<!-- {marker}:end -->",
            "",
        ]
    return "\n".join(lines)


def write_probe_report(
    result: Dict, json_path: Path, markdown_path: Path, command: str, importance_png: Optional[Path] = None
) -> str:
    """Write the results JSON and the markdown report (linking the figure relative to it); returns the markdown."""
    link = None
    if importance_png is not None:
        link = os.path.relpath(Path(importance_png).resolve(), Path(markdown_path).resolve().parent)
    markdown = probe_markdown(result, command, link)
    result = {**result, "provenance": provenance(seed=result.get("settings", {}).get("seed"), command=command)}
    result["provenance"]["versions"].update(library_versions(("lightgbm",)))
    write_json(json_path, result)
    Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_path).write_text(markdown, encoding="utf8")
    return markdown
