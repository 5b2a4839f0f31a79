"""The end of the shipped model card (`assemble --notes`, templates/model_card.md): data and licence, what was
measured (templates/model_card_measured.md) and the limits, from the same results and limits as the docs."""

from pathlib import Path
from typing import List

from .blocks import BENCH_FILES, COMPARE_ROWS, SEGMENTATION_ROWS, Prose
from .limits import limits_block
from .results import Results, source_note
from .ud_blocks import UD_KIND, UD_PIPELINE_DEV_DOCS, ud_pipeline_file

TEMPLATE = Path(__file__).parent / "templates" / "model_card.md"
PROSE = Prose("model_card_measured.md")
# The accuracy lines of en_pairatt (True) and en_pairatt_parser: (results file, result kind, its piece of PROSE).
ACCURACY_LINES = {
    True: (
        (ud_pipeline_file("test", "gold_tokens"), UD_KIND, "ud-test-gold-tokens"),
        (ud_pipeline_file("test", "raw_text"), UD_KIND, "ud-test-raw-text"),
        (UD_PIPELINE_DEV_DOCS, UD_KIND, "ud-dev-docs"),
    ),
    False: (
        (COMPARE_ROWS[2][2], "parser", "parser-test"),
        (SEGMENTATION_ROWS[1][2], "parser", "parser-dev-docs"),
    ),
}


def measured_lines(results: Results, ud_pipeline: bool = False) -> List[str]:
    """Accuracy, accuracy on raw text, speed ratios and memory, with their source."""
    rows = ACCURACY_LINES[ud_pipeline]
    lines = [PROSE(piece, result=result) for path, _, piece in rows if (result := results.json(path)) is not None]
    speed, memory = (results.json(path) for path, _ in BENCH_FILES)
    if speed is not None:
        lines.append(PROSE("speed", inference=speed["inference"]))
    if memory is not None:
        jemalloc = memory.get("jemalloc")
        under_jemalloc = (
            PROSE("memory-jemalloc", growth=jemalloc["peak_rss_growth"], version=jemalloc["version"])
            if jemalloc
            else ""
        )
        ends = {"shortest": memory["runs"][0], "longest": memory["runs"][-1]}
        lines.append(PROSE("memory", memory=memory, jemalloc=under_jemalloc, **ends))
    sources = [(path, kind) for path, kind, _ in rows] + list(BENCH_FILES)
    command = PROSE("command", workflow="ud-pipeline" if ud_pipeline else "all")
    return lines + ["", source_note(results, sources, command)]


def model_card_notes(root: Path = Path("."), ud_pipeline: bool = True) -> str:
    """The model card's end for en_pairatt (the UD pipeline) or, not `ud_pipeline`, en_pairatt_parser."""
    results = Results(root)
    measured, limits = "\n".join(measured_lines(results, ud_pipeline)), limits_block(results, ud_pipeline)
    return TEMPLATE.read_text(encoding="utf8").format(measured=measured, limits=limits).rstrip("\n") + "\n"
