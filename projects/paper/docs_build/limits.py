"""Known limits (templates/limits.md) as README, docs/parser.md and the model card state them, one line each with a
link to the page of its measured detail, for en_pairatt (`ud_pipeline`) or the parser alone
(templates/limit_figures.md); and the end of each shipped pipeline's model card (`python -m docs_build
--model-card --tier`, for `assemble --notes`)."""

import ast
import re
from pathlib import Path
from typing import List, Optional

from .blocks import Prose
from .plan import BLOCKS, PLAN, Block
from .results import Results

TEMPLATE = Path(__file__).parent / "templates" / "limits.md"
PROSE, MEASURED = Prose("limit_figures.md"), Prose("model_card_measured.md")
# Each shipped pipeline's card (`--tier`): plan.json's entry.
MODEL_CARDS = {name: Block(name, entry) for name, entry in PLAN["model_card"].items()}


def role_json(block: Block, results: Results, role: str) -> Optional[dict]:
    """The results file of the block's `role`; None where it is missing or the block has no such role."""
    return block.json(results, role) if role in block.files else None


def max_unsegmented_tokens(results: Results, ud_pipeline: bool = True) -> str:
    """pair_batch.MAX_UNSEGMENTED_TOKENS, read from its module's source: the module imports spaCy."""
    source = Path(__file__).parents[3] / "spacy_pairatt" / "layers" / "pair_batch.py"
    found = re.search(r"^MAX_UNSEGMENTED_TOKENS(?:: \w+)? = ([^#\n]+)", source.read_text(encoding="utf8"), re.M)
    if not found:
        raise ValueError(f"no `MAX_UNSEGMENTED_TOKENS = ...` in {source}")
    return f"{ast.literal_eval(found[1].strip()):,}"


def segmenter(results: Results, ud_pipeline: bool = True) -> str:
    """Where raw text's sentences come from; their errors become parse errors."""
    return PROSE("segmenter-ud-pipeline" if ud_pipeline else "segmenter-parser")


def annotation(results: Results, ud_pipeline: bool = True) -> str:
    """What the shipped pipeline, or the parser alone, annotates."""
    return PROSE("annotation-ud-pipeline" if ud_pipeline else "annotation-parser")


# The template's `{name}`s: each is what the function of that name writes.
FIGURES = (annotation, segmenter, max_unsegmented_tokens)


def limits(results: Results, ud_pipeline: bool = True) -> List[str]:
    """ud_pipeline: the limits of en_pairatt and en_pairatt_trf (`package`, `package-trf`), else of the parser
    alone (`package-parser`)."""
    template = re.sub(r"<!--.*?-->\n", "", TEMPLATE.read_text(encoding="utf8"), flags=re.S)
    figures, texts = {write.__name__: write(results, ud_pipeline) for write in FIGURES}, []
    for item in (" ".join(item.split()) for item in re.split(r"^- ", template, flags=re.M)[1:]):
        whole = re.fullmatch(r"\{(\w+)\}", item)  # an item that is only a figure is left out where it is empty
        texts.append(figures[whole[1]] if whole else item.format_map(figures))
    return [text for text in texts if text]


def limits_block(results: Results, block=None, ud_pipeline: bool = True) -> str:
    """Known limits (README, docs/parser.md and the model card); `block`: the plan's, which names no files."""
    return "\n".join(f"- {text}" for text in limits(results, ud_pipeline)) + "\n"


def measured(results: Results, card: Block) -> str:
    """The model card's accuracy (gold tokens, raw text), speed and memory, each where measured."""
    found = ((piece, results.json(path)) for piece, path, _ in card.files["accuracy"])
    lines = [MEASURED(piece, result=result) for piece, result in found if result is not None]
    speed, memory = role_json(card, results, "speed"), role_json(card, results, "memory")
    lines += [MEASURED("speed", inference=speed["inference"])] if speed else []
    if memory:
        jemalloc = MEASURED("memory-jemalloc", jemalloc=memory["jemalloc"]) if "jemalloc" in memory else ""
        lines.append(MEASURED("memory", memory=memory, jemalloc=jemalloc, longest=memory["runs"][-1]))
    return "\n".join(lines) + "\n\n"


def tiers_section(results: Results) -> str:
    """Both UD pipelines side by side (README's `tiers` block), once all its files are there; else nothing."""
    block = BLOCKS["tiers"]
    if any(results.json(path) is None for path, _ in block.sources(results)):
        return ""
    return MEASURED("tiers", table=block(results)) + "\n"


def model_card_notes(root: Path = Path("."), tier: str = "ud_pipeline") -> str:
    """The model card's end for a tier of MODEL_CARDS: en_pairatt (`ud_pipeline`, the UD pipeline),
    en_pairatt_parser (`parser`) or en_pairatt_trf (`ud_pipeline_trf`)."""
    results, card = Results(root), MODEL_CARDS[tier]
    notes = TEMPLATE.with_name("model_card.md").read_text(encoding="utf8")
    limits = limits_block(results, ud_pipeline=card["ud_pipeline"])
    tiers = tiers_section(results) if card["ud_pipeline"] else ""
    notes = notes.format(tiers=tiers, measured=card(results), limits=limits, encoder=card["encoder"])
    return notes.rstrip("\n") + "\n"
