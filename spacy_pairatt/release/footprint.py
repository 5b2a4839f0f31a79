"""Disk and time a user needs (the README's requirements): the installed stack measured here, training
times from the Table 1 records."""

from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path
from typing import Dict, List, Tuple

from .results import Results, source_note


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
        for text in requires(current) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return total, sorted(seen - {name})


def measure_footprint(root: Path) -> Dict:
    """results/footprint.json: disk of the installed stack and of the project's data and trained models."""
    from ..provenance import provenance

    stack, names = stack_bytes()
    folders = {}
    for folder in ("assets", "corpus", "training/pairatt/model-best"):
        path = Path(root) / folder
        if path.exists():
            folders[folder] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return {"stack_bytes": stack, "stack": names, "folder_bytes": folders, "provenance": provenance()}


def requirements_block(results: Results) -> str:
    """Disk and time for the README, from results/footprint.json and the Table 1 training times."""
    lines = []
    footprint = results.json("results/footprint.json")
    if footprint is not None:
        folders = footprint["folder_bytes"]
        model, data = folders.get("training/pairatt/model-best"), folders.get("assets", 0) + folders.get("corpus", 0)
        lines.append(
            f"- Disk: {footprint['stack_bytes'] / 1e9:.1f} GB for the installed Python stack with torch's CPU build"
            + (f", {model / 1e6:,.0f} MB per trained pipeline (the workflow keeps several)" if model else "")
            + (f" and {data / 1e6:,.0f} MB of data and corpora" if data else "")
            + "."
        )
    ablation = results.json("results/ablation.json")
    if ablation is not None:
        rows = {row["key"]: row for row in ablation["datasets"]["ewt"]["rows"]}
        fine_tuned = [
            rows[key]["train_seconds"] for key in ("ft_emb", "ft_emb_att") if rows.get(key, {}).get("train_seconds")
        ]
        transition = rows.get("transition", {}).get("train_seconds")
        if fine_tuned and transition:
            lines.append(
                f"- Time on 2 CPU cores: one fine-tuned parser at the `all` workflow's budget trained in "
                f"{min(fine_tuned) / 60:.0f} to {max(fine_tuned) / 60:.0f} minutes (Table 1's ft rows on EWT), the "
                f"transition parser in {transition / 60:.0f}; add evaluation, the senter and packaging."
            )
    sources = [
        ("results/footprint.json", "footprint"),
        ("results/ablation/ewt/ft_emb_train.json", "parser"),
        ("results/ablation/ewt/ft_emb_att_train.json", "parser"),
        ("results/ablation/ewt/transition_train.json", "transition"),
    ]
    command = "python -m spacy_pairatt docs-tables --measure-footprint` and `python -m spacy project run ablation"
    return "\n".join(lines) + ("\n\n" if lines else "") + source_note(results, sources, command)
