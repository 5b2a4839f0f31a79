"""results/footprint.json (`docs-tables --measure-footprint`): the disk the installed stack takes, measured
here, and the project's data and trained models."""

from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path
from typing import Dict, List, Tuple


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


def measure_footprint(root: Path) -> Dict:
    from spacy_pairatt.provenance import provenance

    stack, names = stack_bytes()
    folders = {
        folder: sum(f.stat().st_size for f in (Path(root) / folder).rglob("*") if f.is_file())
        for folder in ("assets", "corpus", "training/pairatt/model-best")
        if (Path(root) / folder).exists()
    }
    return {"stack_bytes": stack, "stack": names, "folder_bytes": folders, "provenance": provenance()}
