"""`register_extensions()`: one idempotent call registers every extension, and the pipes make it, so a
user who only loads a pipeline or adds a pipe never calls it."""

import json
import subprocess
import sys

import pytest
from spacy.tokens import Doc, Span, Token

import spacy_pairatt
from spacy_pairatt.integration.extensions import register_extensions
from tests.conftest import make_pipeline

EXTENSIONS = {
    "Doc": ["pairatt_confidence", "relations", "pairatt_attention"],
    "Token": ["head_prob", "dep_prob", "head_candidates"],
    "Span": ["parse_confidence", "arc_marginals"],
}
# Prints which extensions are registered, and whether any hook of the package is on sys.meta_path,
# after the statements it is given run in a fresh process that imports neither this package nor its
# register_extensions.
REPORT = """
import json, sys
import spacy
from spacy.tokens import Doc, Span, Token
{statements}
owners = {{"Doc": Doc, "Token": Token, "Span": Span}}
print(json.dumps({{
    "registered": {{owner: sorted(n for n in {names!r}[owner] if owners[owner].has_extension(n)) for owner in owners}},
    "hooks": [type(finder).__module__ for finder in sys.meta_path if "spacy_pairatt" in type(finder).__module__],
}}))
"""


def in_a_fresh_process(statements: str, *args: str) -> dict:
    code = REPORT.format(statements=statements, names=EXTENSIONS)
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.splitlines()[-1])


def registered():
    owners = {"Doc": Doc, "Token": Token, "Span": Span}
    return {owner: {name: owners[owner].get_extension(name) for name in names} for owner, names in EXTENSIONS.items()}


def test_register_extensions_is_public_and_idempotent():
    assert spacy_pairatt.register_extensions is register_extensions
    assert "register_extensions" in spacy_pairatt.__all__
    register_extensions()
    first = registered()
    assert all(extension is not None for names in first.values() for extension in names.values())
    register_extensions()
    assert registered() == first


@pytest.mark.parametrize("factory", ["pairatt_parser", "pairatt_rel", "pairatt_release_attention"])
def test_adding_a_pipe_registers_every_extension(factory):
    report = in_a_fresh_process(f"spacy.blank('en').add_pipe({factory!r})")
    assert report == {"registered": {owner: sorted(names) for owner, names in EXTENSIONS.items()}, "hooks": []}


def test_loading_a_saved_pipeline_registers_every_extension_and_its_confidence_reads(tiny_bert_dir, tmp_path):
    nlp = make_pipeline(tiny_bert_dir)
    nlp.get_pipe("pairatt_parser").add_label("dep")
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    parse = (
        "nlp = spacy.load(sys.argv[1])\n"
        "doc = nlp('The cat sat on the mat .')\n"
        "assert all(0 <= token._.head_prob <= 1 for token in doc), [token._.head_prob for token in doc]\n"
        "assert doc._.pairatt_confidence is not None and doc._.relations == []\n"
    )
    report = in_a_fresh_process(parse, str(tmp_path / "pipeline"))
    assert report == {"registered": {owner: sorted(names) for owner, names in EXTENSIONS.items()}, "hooks": []}
