"""The runtime stands apart (docs/architecture.md): what `spacy.load` imports holds no study, evaluation,
command line, plotting, LightGBM or Dask code."""

import json
import subprocess
import sys

# Run in a fresh interpreter, so that what this test process imported does not count: the modules after
# `import spacy_pairatt`, then after building each component and loading every registered function that
# spaCy finds through the package's entry points (all that a saved pipeline's config can name).
IMPORTS = """
import json, sys
from importlib.metadata import entry_points
import spacy_pairatt
after_import = sorted(sys.modules)
import spacy
nlp = spacy.blank("en")
for name in ("pairatt_parser", "pairatt_rel", "pairatt_release_attention"):
    nlp.add_pipe(name)
loaded = []
for group in ("factories", "architectures", "scorers", "readers", "misc", "span_getters", "tokenizers"):
    for entry_point in entry_points(group="spacy_" + group):
        if entry_point.value.startswith("spacy_pairatt"):
            entry_point.load()
            loaded.append(entry_point.name)
print(json.dumps({"import": after_import, "runtime": sorted(sys.modules), "entry_points": loaded}))
"""
NOT_RUNTIME = ("pairatt_paper", "spacy_pairatt.evaluation", "spacy_pairatt.cli", "docs_build",
               "spacy_pairatt.packaging.shipped_pipeline", "spacy_pairatt.parse_files",
               "matplotlib", "lightgbm", "dask", "distributed")  # fmt: skip


def imported(modules, prefixes=NOT_RUNTIME):
    return [name for name in modules if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)]


def test_loading_a_pipeline_imports_no_study_evaluation_plotting_lightgbm_or_dask():
    result = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True)
    modules = json.loads(result.stdout.strip().splitlines()[-1])
    assert [name for name in modules["import"] if name.startswith("spacy_pairatt.")] == ["spacy_pairatt.about"]
    assert "spacy-pairatt.parser_scorer.v1" in modules["entry_points"]
    assert "spacy_pairatt.components.parser" in modules["runtime"]
    assert imported(modules["import"]) == []
    assert imported(modules["runtime"]) == []


def test_the_public_names_are_the_relations_type_and_its_picture():
    import spacy_pairatt
    from spacy_pairatt.integration import doc_relations

    assert spacy_pairatt.Relation is doc_relations.Relation
    assert spacy_pairatt.render_relations is doc_relations.render_relations


def test_the_architecture_map_names_every_folder_and_top_level_module_and_nothing_else():
    """docs/architecture.md's map of spacy_pairatt/ is the package as it is: no folder or module left off,
    none named that is gone."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "architecture.md").read_text(encoding="utf8")
    tree = text.split("```\nspacy_pairatt/\n", 1)[1].split("```", 1)[0]
    named = {line.split()[0] for line in tree.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    named.discard("#")
    package = root / "spacy_pairatt"
    present = {f"{path.name}/" for path in package.iterdir() if (path / "__init__.py").is_file()}
    present |= {path.name for path in package.glob("*.py")}
    assert named == present


def map_entries(text):
    """docs/architecture.md's map of spacy_pairatt/: each folder or module it names, with the text of its entry."""
    tree = text.split("```\nspacy_pairatt/\n", 1)[1].split("```", 1)[0]
    entries, name = {}, None
    for line in tree.splitlines():
        if line.startswith("  #"):
            name = None
        elif line.startswith("  ") and not line.startswith("   "):
            name, _, rest = line.strip().partition(" ")
            entries[name] = rest
        elif name is not None:
            entries[name] += " " + line.strip()
    return entries


def test_the_architecture_map_names_every_module_of_each_folder_and_only_modules_that_exist():
    """Each folder's entry names each of its modules (by name, with or without .py); every `folder/module.py`
    the page names is there."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "architecture.md").read_text(encoding="utf8")
    package = root / "spacy_pairatt"
    for folder, entry in map_entries(text).items():
        if not folder.endswith("/"):
            continue
        words = set(re.findall(r"\w+", entry))
        modules = {path.stem for path in (package / folder).glob("*.py")} - {"__init__"}
        assert modules - words == set(), f"docs/architecture.md's {folder} names no {sorted(modules - words)}"
    folders = "|".join(path.name for path in package.iterdir() if (path / "__init__.py").is_file())
    for folder, module in re.findall(rf"(?<![\w/])({folders})/(\w+)\.py", text):
        assert (package / folder / f"{module}.py").is_file(), f"docs/architecture.md names {folder}/{module}.py"
