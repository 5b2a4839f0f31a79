"""The end of the shipped model card (`python -m docs_build --model-card`, for `assemble --notes`;
templates/model_card.md): data and licence, what was measured (templates/model_card_measured.md) and the
limits, from the same results and limits as the docs."""

from pathlib import Path

from .blocks import Prose
from .limits import limits_block
from .plan import PLAN
from .results import Results, source_note

TEMPLATE = Path(__file__).parent / "templates" / "model_card.md"
PROSE = Prose("model_card_measured.md")


def measured(results: Results, ud_pipeline: bool) -> str:
    """Accuracy, accuracy on raw text, speed ratios and memory, with their source."""
    card = PLAN["model_card"]["ud_pipeline" if ud_pipeline else "parser"]
    files = card["files"]
    lines = [
        PROSE(piece, result=found) for piece, path, _ in files["accuracy"] if (found := results.json(path)) is not None
    ]
    speed, memory = (results.json(files[role][0][0]) for role in ("speed", "memory"))
    if speed is not None:
        lines.append(PROSE("speed", inference=speed["inference"]))
    if memory is not None:
        jemalloc = memory.get("jemalloc")
        under_jemalloc = jemalloc and PROSE(
            "memory-jemalloc", growth=jemalloc["peak_rss_growth"], version=jemalloc["version"]
        )
        ends = {"shortest": memory["runs"][0], "longest": memory["runs"][-1]}
        lines.append(PROSE("memory", memory=memory, jemalloc=under_jemalloc or "", **ends))
    sources = [tuple(row[-2:]) for rows in files.values() for row in rows]
    return "\n".join(lines + ["", source_note(results, sources, PROSE("command", workflow=card["workflow"]))])


def model_card_notes(root: Path = Path("."), ud_pipeline: bool = True) -> str:
    """The model card's end for en_pairatt (the UD pipeline) or, not `ud_pipeline`, en_pairatt_parser."""
    results = Results(root)
    text = TEMPLATE.read_text(encoding="utf8").format(
        measured=measured(results, ud_pipeline), limits=limits_block(results, ud_pipeline=ud_pipeline)
    )
    return text.rstrip("\n") + "\n"
