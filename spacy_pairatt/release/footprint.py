"""Disk, time and memory a user needs (the README's requirements): the installed stack measured here,
training times and peak memory from the `all` workflow's run_cost records."""

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


# The `all` workflow's trainings, in the order it runs them: (results file, result kind, what it trains).
ALL_WORKFLOW_TRAININGS = (
    ("results/train_pairatt_cost.json", "parser", "pairatt_parser"),
    ("results/train_transition_cost.json", "transition", "spaCy's transition parser"),
    ("results/train_ud_pipeline_cost.json", "ud_pipeline", "the UD pipeline (stage 1)"),
    ("results/train_ud_pipeline_senter_cost.json", "ud_pipeline", "its senter (stage 2)"),
)


def requirements_block(results: Results) -> str:
    """Disk and time for the README: results/footprint.json and the run_cost records of the `all`
    workflow's trainings (wall time and peak RSS), so that a user can tell whether the machine fits."""
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
    costs = [(what, results.json(path)) for path, _, what in ALL_WORKFLOW_TRAININGS]
    measured = [(what, cost) for what, cost in costs if cost is not None]
    if measured:
        each = "; ".join(
            f"{what} {cost['wall_seconds'] / 60:.0f} min, {cost['peak_rss_mb'] / 1000:.1f} GB"
            for what, cost in measured
        )
        total = sum(cost["wall_seconds"] for _, cost in measured) / 60
        cores = {cost["provenance"].get("cores") for _, cost in measured} - {None}
        where = f"{cores.pop()} CPU cores" if len(cores) == 1 else "CPU"
        lines.append(
            f"- Time and memory on {where}, the `all` workflow's trainings (wall time, peak RSS): {each}; "
            f"{total:.0f} min in all, before evaluation, the small CNN senter and packaging. A machine with less "
            f"memory than the largest of these swaps or stops there."
        )
    sources = [("results/footprint.json", "footprint")] + [(path, kind) for path, kind, _ in ALL_WORKFLOW_TRAININGS]
    command = "python -m spacy_pairatt docs-tables --measure-footprint` and `python -m spacy project run all"
    return "\n".join(lines) + ("\n\n" if lines else "") + source_note(results, sources, command)
