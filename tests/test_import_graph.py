"""Imports go one way: the modules of spacy_pairatt and of the paper's project (projects/paper: the study,
pairatt_paper, and the docs tool, docs_build) import each other without a cycle, and only the project imports
the package. The graph is built from the source (no import
runs): every import statement, at module level and inside functions (a lazy import that closes a loop still ties
the two modules together), relative ones resolved."""

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set

import spacy_pairatt

PACKAGE = Path(spacy_pairatt.__file__).parent
PAPER = PACKAGE.parent / "projects" / "paper"
DOCS_TOOL = PAPER / "docs_build"
STUDY = PAPER / "pairatt_paper"
BRIDGE = r"import_module\(|spec_from_file_location|sys\.path\.(insert|append)"  # what loads a module by path


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent if path.is_relative_to(PACKAGE) else PAPER).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree: ast.Module) -> Iterator[ast.AST]:
    """Every import statement of a module: at its top level, in `if` and `try`, and inside functions."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def targets(node: ast.AST, module: str, is_package: bool, modules: Set[str]) -> List[str]:
    """The package's modules an import statement of `module` names (relative imports resolved)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = node.module if node.level == 0 else ".".join(filter(None, (base, node.module)))
        names = [source] + [f"{source}.{alias.name}" for alias in node.names]
    # A module's own packages are imported before it anyway: naming one (`from .. import provenance`) adds nothing.
    return [name for name in names if name in modules and name != module and not module.startswith(name + ".")]


def import_graph() -> Dict[str, Set[str]]:
    paths = {module_name(path): path for folder in (PACKAGE, DOCS_TOOL, STUDY) for path in folder.rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf8"))
        is_package = path.name == "__init__.py"
        graph[module] = {t for node in imports(tree) for t in targets(node, module, is_package, set(paths))}
    return graph


def cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One cycle of `graph` (its modules in order, the first repeated at the end), or [] where there is none."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_package_and_the_docs_tool_import_without_a_cycle():
    graph = import_graph()
    assert "docs_build.plan" in graph and "pairatt_paper.ablation" in graph and "spacy_pairatt.cli" in graph
    assert cycle(graph) == []


def test_the_docs_tool_uses_the_package_and_not_its_command_line():
    """docs_build reads what the package writes (reports, study tables); the package never loads the tool (no
    import, no sys.path or importlib bridge), and the tool imports no `spacy_pairatt.cli`."""
    graph = import_graph()
    edges = [(module, target) for module, targets in graph.items() for target in targets]
    assert [(m, t) for m, t in edges if m.startswith("docs_build") and t.startswith("spacy_pairatt.cli")] == []
    paper = ("docs_build", "pairatt_paper")
    assert [(m, t) for m, t in edges if m.startswith("spacy_pairatt") and t.startswith(paper)] == []
    texts = {path: path.read_text(encoding="utf8") for path in PACKAGE.rglob("*.py")}
    bridges = [path for path, text in texts.items() if re.search(r"docs_build|pairatt_paper|projects/", text)
               and re.search(BRIDGE, text)]  # fmt: skip
    assert bridges == []


# The docs tool's size bound (issue 56): it renders results files into markdown, and reasoning about results
# belongs in the package (spacy_pairatt.reporting), where the commands that write them can use it too.
DOCS_TOOL_MAX_LINES = 800


def test_the_docs_tool_stays_small():
    lines = {path.name: len(path.read_text(encoding="utf8").splitlines()) for path in DOCS_TOOL.rglob("*.py")}
    assert sum(lines.values()) <= DOCS_TOOL_MAX_LINES, lines


def test_the_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []
