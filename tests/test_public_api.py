"""The public API (`spacy_pairatt.__all__`, docs/api.md) and the registered names (setup.py's entry points)."""

import json
import re
import subprocess
import sys
import warnings

import pytest
import spacy

import spacy_pairatt
from tests.conftest import REPO

SETUP = (REPO / "setup.py").read_text(encoding="utf8")
# "name = module:function", with the implicit concatenation of a string split over two lines undone.
ENTRY_POINTS = re.findall(r'"([\w.-]+) = (spacy_pairatt[\w.]+):(\w+)"', re.sub(r'"\s*\n\s*"', "", SETUP))
GROUPS = dict(re.findall(r'"(?:spacy|thinc)_(\w+)": \[([^\]]*)\]', SETUP, flags=re.S))
REGISTRIES = {"factories": None, "scorers": "scorers", "readers": "readers", "callbacks": "callbacks", "misc": "misc"}
REGISTRIES |= {"architectures": "architectures", "span_getters": "span_getters", "tokenizers": "tokenizers"}
REGISTRIES |= {"schedules": "schedules", "augmenters": "augmenters"}

LAZY_IMPORTS = """
import json, sys
import spacy_pairatt
after_import = sorted(m for m in sys.modules if m.startswith("spacy_pairatt"))
names = {}
for name in spacy_pairatt.__all__:
    before = set(sys.modules)
    getattr(spacy_pairatt, name)
    names[name] = sorted(set(sys.modules) - before)
print(json.dumps({"after_import": after_import, "names": names}))
"""


def test_every_public_name_loads_on_first_use_only():
    result = subprocess.run([sys.executable, "-c", LAZY_IMPORTS], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["after_import"] == ["spacy_pairatt", "spacy_pairatt.about"]
    assert set(report["names"]) == set(spacy_pairatt.__all__)
    assert "spacy_pairatt.components.parser" in report["names"]["PairAttParser"]


IMPORT_CHANGES_NOTHING = """
import json, sys
runs = []
sys.addaudithook(lambda event, args: runs.append(repr(args[:2])) if event == "subprocess.Popen" else None)
hooks = (list(sys.meta_path), list(sys.path_hooks))
import spacy_pairatt
package_hooks = (list(sys.meta_path), list(sys.path_hooks)) == hooks
import spacy_pairatt.cli, spacy_pairatt.reporting.provenance
import spacy
from spacy.tokens import Doc
registered = Doc.has_extension("pairatt_confidence")
print(json.dumps({"hooks_unchanged": package_hooks, "runs": runs, "registered": registered}))
"""


def test_importing_the_package_or_its_command_line_installs_no_hook_and_runs_no_git():
    """Registering is `register_extensions()`'s job and asking git the command's (`code_at_start`)."""
    result = subprocess.run([sys.executable, "-c", IMPORT_CHANGES_NOTHING], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"hooks_unchanged": True, "runs": [], "registered": False}


def test_the_public_names_are_the_pipes_data_classes_and_user_functions():
    from spacy_pairatt.components.parser import PairAttParser
    from spacy_pairatt.components.relations import PairAttRelationExtractor
    from spacy_pairatt.integration.doc_relations import Relation, render_relations

    assert spacy_pairatt.PairAttParser is PairAttParser
    assert spacy_pairatt.PairAttRelationExtractor is PairAttRelationExtractor
    assert spacy_pairatt.Relation is Relation and spacy_pairatt.render_relations is render_relations
    assert {"ParseScores", "ArcScores", "render_parse", "tree_marginals", "__version__"} <= set(spacy_pairatt.__all__)
    with pytest.raises(AttributeError):
        spacy_pairatt.no_such_name


API = (REPO / "docs" / "api.md").read_text(encoding="utf8")
# "- `NAME` (`MODULE`): ..." in api.md's Python section: a public name and the module it says defines it.
DOCUMENTED_MODULES = re.findall(r"^- `(\w+)` \(`([\w.]+)`\)", API.split("\n## Registered names")[0], flags=re.M)


def test_docs_api_lists_every_public_and_registered_name():
    for name in spacy_pairatt.__all__:
        assert f"`{name}`" in API, name
    for name, _, _ in ENTRY_POINTS:
        assert f"`{name}`" in API, name


def test_docs_api_names_the_module_each_public_name_is_defined_in():
    from importlib import import_module

    assert {name for name, _ in DOCUMENTED_MODULES} == set(spacy_pairatt.__all__) - {"__version__"}
    for name, module in DOCUMENTED_MODULES:
        defined = getattr(import_module(f"spacy_pairatt.{module}"), name)
        assert defined is getattr(spacy_pairatt, name), f"{name} is not the {module} one"
        assert getattr(defined, "__module__", None) == f"spacy_pairatt.{module}", f"{name} is defined elsewhere"


# "- `NAME` (`MODULE.FUNCTION`...": a registered name and the builder api.md says setup.py registers under it.
DOCUMENTED_BUILDERS = re.findall(r"^- `([\w.-]+)` \(`([\w.]+)`", API.split("\n## Registered names")[1], flags=re.M)


def test_docs_api_names_the_builder_of_each_registered_name_in_the_module_that_defines_it():
    from importlib import import_module

    documented = {name: f"spacy_pairatt.{builder}" for name, builder in DOCUMENTED_BUILDERS}
    assert len(documented) == len(DOCUMENTED_BUILDERS), "a registered name is listed twice"
    assert documented == {name: f"{module}.{function}" for name, module, function in ENTRY_POINTS}
    for name, dotted in documented.items():
        module, _, function = dotted.rpartition(".")
        assert getattr(import_module(module), function).__module__ == module, f"{name}'s builder is defined elsewhere"


def test_docs_api_names_only_modules_and_functions_that_exist():
    from importlib import import_module

    for dotted in set(re.findall(r"`(spacy_pairatt(?:\.\w+)+)", API)):
        module, _, attribute = dotted.rpartition(".")
        try:
            import_module(dotted)
        except ModuleNotFoundError:
            assert hasattr(import_module(module), attribute), dotted


@pytest.mark.parametrize("name,module,function", ENTRY_POINTS, ids=[name for name, _, _ in ENTRY_POINTS])
def test_each_entry_point_resolves_to_the_function_registered_under_its_name(name, module, function):
    from importlib import import_module

    builder = getattr(import_module(module), function)
    group = next(group for group, lines in GROUPS.items() if f'"{name} = ' in re.sub(r'"\s*\n\s*"', "", lines))
    if group == "factories":
        assert spacy.registry.factories.get(name) is builder
        return
    registry = getattr(spacy.registry, REGISTRIES[group])
    assert registry.get(name) is builder, f"{name} is registered on another function than setup.py's {function}"


def test_the_deprecated_names_build_what_the_new_ones_build_with_a_warning():
    from spacy_pairatt.layers.pair_scorer import ArcScores  # noqa: F401 (the biaffine contract)

    architectures = spacy.registry.architectures
    with pytest.warns(DeprecationWarning, match="BiaffinePairScorer.v1"):
        old = architectures.get("spacy-pairatt.PairScorer.v1")(mode="biaffine")
    new = architectures.get("spacy-pairatt.BiaffinePairScorer.v1")()
    assert old.attrs == new.attrs and old._func is new._func
    with pytest.warns(DeprecationWarning, match="PaperPairScorer.v1"):
        old = architectures.get("spacy-pairatt.PairScorer.v1")(mode="paper")
    assert old._func is architectures.get("spacy-pairatt.PaperPairScorer.v1")()._func
    with pytest.warns(DeprecationWarning, match="TransformerDataListener.v1"):
        listener = architectures.get("spacy-pairatt.TransformerListener.v1")()
    assert type(listener) is type(architectures.get("spacy-pairatt.TransformerDataListener.v1")())
    with pytest.warns(DeprecationWarning, match="PairAttParserModel.v1"):
        model = architectures.get("spacy-pairatt.PairAttParser.v1")(listener, new)
    assert model.get_ref("pair_scorer") is new
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = architectures.get("spacy-pairatt.PairAttParserModel.v1")(listener, pair_scorer=new)
    assert model.get_ref("pair_scorer") is new


def test_a_config_naming_the_old_scorer_section_still_builds_with_a_warning():
    nlp = spacy.blank("en")
    old_model = {
        "@architectures": "spacy-pairatt.PairAttRelations.v1",
        "tok2vec": {"@architectures": "spacy-pairatt.TransformerDataListener.v1"},
        "scorer": {"@architectures": "spacy-pairatt.RelationScorer.v1", "hidden_width": 8},
    }
    with pytest.warns(DeprecationWarning, match=r"\[model.scorer\].*\[model.pair_scorer\]"):
        pipe = nlp.add_pipe("pairatt_rel", config={"model": old_model})
    assert pipe.model.get_ref("pair_scorer").attrs["hidden_width"] == 8


SAVE_WITH_CONFIDENCE = """
import sys
import spacy_pairatt
import spacy
from spacy.tokens import DocBin
spacy_pairatt.register_extensions()
doc = spacy.blank("en")("A saved doc .")
doc._.pairatt_confidence = {"written": "before"}
DocBin(docs=[doc], store_user_data=True).to_disk(sys.argv[1])
"""
READ_IN_A_FRESH_PROCESS = """
import sys
import spacy_pairatt
from spacy.tokens import DocBin
from spacy.vocab import Vocab
doc = next(DocBin().from_disk(sys.argv[1]).get_docs(Vocab()))
spacy_pairatt.register_extensions()
print(doc._.pairatt_confidence)
"""


def test_docs_saved_with_confidence_read_back_in_a_fresh_process_that_registers_the_extensions(tmp_path):
    """No pipeline loaded: `register_extensions()` is all a reader of saved Docs calls."""
    path = str(tmp_path / "docs.spacy")
    subprocess.run([sys.executable, "-c", SAVE_WITH_CONFIDENCE, path], check=True, capture_output=True)
    read = subprocess.run([sys.executable, "-c", READ_IN_A_FRESH_PROCESS, path], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr[-500:]
    assert read.stdout.strip() == "{'written': 'before'}"
