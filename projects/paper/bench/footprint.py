"""results/footprint.json: the disk the installed stack takes (spacy-pairatt and its requirements, recursively),
and the project's data and trained model, for the docs' `requirements` block.

    python bench/footprint.py [--root .] [--output results/footprint.json]
"""

import argparse
from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path
from typing import Dict, List, Tuple

from spacy_pairatt.reporting.provenance import code_at_start, provenance
from spacy_pairatt.reporting.tables import report_json

FOLDERS = ("assets", "corpus", "training/pairatt/model-best")


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
    stack, names = stack_bytes()
    folders = {
        folder: sum(f.stat().st_size for f in (root / folder).rglob("*") if f.is_file())
        for folder in FOLDERS
        if (root / folder).exists()
    }
    return {"stack_bytes": stack, "stack": names, "folder_bytes": folders, "provenance": provenance()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the checkout (assets/, corpus/, training/)")
    parser.add_argument("--output", default="results/footprint.json")
    args = parser.parse_args(argv)
    report_json(footprint(Path(args.root)), args.output)


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
