"""Pipeline wheels as `package` and `package-trf` build en_pairatt and en_pairatt_trf: assembled with their model
cards, built by `spacy package`, installed offline into a fresh venv, loaded by name."""

import json
import os
import shutil
import site
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

import numpy as np
import pytest
import spacy

from spacy_pairatt.integration.scoring import sentence_is_one_tree
from spacy_pairatt.packaging.shipped_pipeline import package_requirements
from tests.conftest import (
    PAPER,
    REPO,
    UD_DIR,
    examples_from_docs,
    make_pipeline,
    train_ud_pipeline,
    write_first_sentences,
)

# Not en_pairatt: a user who ran the main job has en_pairatt installed, the venv sees it, and pip would find the
# wheel's name and version already satisfied there and install nothing into the venv.
PACKAGE_NAME = "pairatt_wheel_test"
TEXT = "The parser reads the attention between words. It builds one tree per sentence!"


def load_and_parse(package: str) -> str:
    """What the venv's python runs: where the package was imported from, its meta.json and model card, the parse,
    and the distributions it sees."""
    return f"""
import json
from importlib.metadata import distributions
from pathlib import Path
import spacy, {package} as package
nlp = spacy.load({package!r})
doc = nlp({TEXT!r})
print(json.dumps({{
    "module": package.__file__,
    "meta": json.loads((Path(package.__file__).parent / "meta.json").read_text()),
    "readme": next(Path(package.__file__).parent.glob("{package}-*/README.md")).read_text(),
    "heads": [token.head.i for token in doc],
    "sents": [[sent.start, sent.end] for sent in doc.sents],
    "pipe_names": nlp.pipe_names,
    "attention_kept": "attentions" in doc._.trf_data.model_output,
    "distributions": sorted({{d.metadata["Name"] for d in distributions() if d.metadata["Name"]}}),
}}))
"""


# The distribution that test_package_test_passes_inside_a_virtualenv installs into its virtualenv only.
MARKER = "pairatt-virtualenv-marker"


def site_dirs() -> list:
    """The running interpreter's site-packages directories (a virtualenv's own, a conda env's, the system's)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and Path(site.getusersitepackages()).is_dir():
        dirs.append(site.getusersitepackages())
    return dirs


def venv_seeing_this_environment(path: Path, env=None) -> Path:
    """A venv (no pip of its own) whose python sees the packages of the running interpreter; its python.

    Not `--system-site-packages`: from inside a virtualenv that shows the base interpreter's packages, not the
    virtualenv's. A .pth file in the venv's site-packages adds the running interpreter's site directories with
    `site.addsitedir`, so their own .pth files (editable installs) are read too; the venv's own site-packages,
    where pip installs, stays first.
    """
    run(sys.executable, "-m", "venv", "--without-pip", path, env=env)
    python = Path(path) / "bin" / "python"
    lines = [f"import site; site.addsitedir({directory!r})" for directory in site_dirs()]
    (purelib(python, env) / "_pairatt_running_environment.pth").write_text("\n".join(lines) + "\n")
    return python


def purelib(python: Path, env=None) -> Path:
    """The site-packages directory that `python` installs into."""
    return Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", env=env).strip())


def run(*args, env) -> str:
    """Run a command; on failure, fail the test with its output."""
    result = subprocess.run([str(arg) for arg in args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def install_offline_and_parse(model: Path, scores: Path, tier: str, name: str, tmp_path: Path) -> dict:
    """`model` as a `package` command ships it: the model card of `tier` (the docs tool's --tier), assembled with
    the `scores` file, built by `spacy package` as en_`name`, installed offline into a fresh venv and loaded by
    name there; load_and_parse's answer, with the venv."""
    # No network: the Hugging Face libraries stay offline, and pip (also inside `python -m build`, which then
    # fails over to `setup.py bdist_wheel`) sees no index. PYTHONPATH: this checkout's spacy_pairatt is the
    # code under test, whichever copy the installed entry points were made from; projects/paper holds the docs tool.
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PIP_NO_INDEX": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), str(PAPER), os.environ.get("PYTHONPATH")])),
    }
    shipped, packages, package = tmp_path / "shipped", tmp_path / "packages", f"en_{name}"
    # The model card's notes, as `package` writes them: from this checkout's docs tool, for results/ of tmp_path.
    run(sys.executable, "-m", "docs_build", "--root", tmp_path, "--model-card", tmp_path / "notes.md", "--tier", tier,
        env=env)  # fmt: skip
    assemble_args = ["--accuracy", scores, "--version", "0.1.0", "--notes", tmp_path / "notes.md"]
    run(sys.executable, "-m", "spacy_pairatt", "assemble", model, shipped, *assemble_args, env=env)
    packages.mkdir()
    package_args = ["--name", name, "--version", "0.1.0", "--build", "wheel"]
    run(sys.executable, "-m", "spacy", "package", shipped, packages, *package_args, env=env)
    (wheel,) = (packages / f"{package}-0.1.0" / "dist").glob("*.whl")

    # The venv sees the running interpreter's packages (spaCy, torch, spacy_pairatt; a virtualenv's, a conda
    # env's or the system's): there is no network to install them from, and torch alone is several hundred MB.
    # The pip visible through it installs into the venv; without --no-deps, so the wheel's requirements must
    # resolve against that stack offline.
    venv = tmp_path / "venv"
    python = venv_seeing_this_environment(venv, env=env)
    run(python, "-m", "pip", "install", "--no-index", wheel, env=env)
    result = json.loads(run(python, "-c", load_and_parse(package), env=env))
    assert Path(result["module"]).resolve().is_relative_to(venv.resolve())
    seen_here = {d.metadata["Name"] for d in distributions() if d.metadata["Name"]}
    assert seen_here <= set(result["distributions"]), sorted(seen_here - set(result["distributions"]))
    return result


def assert_scored_and_one_tree_a_sentence(result: dict, scores: dict):
    """meta.json carries the accuracy file's parse scores and the pinned stack; the parse, one tree a sentence."""
    meta = result["meta"]
    assert meta["performance"]["dep_las"] == pytest.approx(scores["dep_las"])
    assert meta["performance"]["dep_uas"] == pytest.approx(scores["dep_uas"])
    assert set(package_requirements()) <= set(meta["requirements"])
    assert "### Limits" in result["readme"] and "CC BY-SA 4.0" in result["readme"]
    assert result["pipe_names"][-1] == "pairatt_release_attention" and not result["attention_kept"]
    heads = np.array(result["heads"])
    for start, end in result["sents"]:
        assert sentence_is_one_tree(heads, start, end)
        assert sum(heads[i] == i for i in range(start, end)) == 1


@pytest.mark.slow
def test_wheel_installs_offline_and_parses(tiny_bert_dir, ud_train_docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # commands run away from the checkout and its packages/
    encoder = shutil.copytree(tiny_bert_dir, tmp_path / "encoder")
    nlp = make_pipeline(str(encoder))
    examples = examples_from_docs(nlp, ud_train_docs[:20])
    optimizer = nlp.initialize(lambda: examples)
    nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "model")
    scores = nlp.evaluate(examples)
    (tmp_path / "scores.json").write_text(json.dumps({"scores": scores}))
    # The wheel must carry the encoder's weights: from here on the directory they were read from is gone.
    shutil.rmtree(encoder)

    result = install_offline_and_parse(tmp_path / "model", tmp_path / "scores.json", "parser", PACKAGE_NAME, tmp_path)

    assert_scored_and_one_tree_a_sentence(result, scores)
    assert len(result["sents"]) == 2


@pytest.mark.slow
def test_trf_wheel_installs_offline_and_parses(tiny_mpnet_dir, tmp_path, monkeypatch):
    """en_pairatt_trf as `package-trf` builds it: configs/pipeline_mpnet.cfg (on a tiny random MPNet) trained two
    steps, with en_pairatt_trf's model card, its encoder named in meta.json."""
    from spacy_pairatt.corpora.ud_documents import annotated_paragraph_docs

    source = UD_DIR / "en_ewt-ud-train.conllu"
    if not source.exists():
        pytest.skip(f"UD English-EWT not found at {source}")
    monkeypatch.chdir(tmp_path)
    encoder = shutil.copytree(tiny_mpnet_dir, tmp_path / "encoder")
    block = write_first_sentences(source, 40, tmp_path / "ewt.conllu")  # two paragraphs: train, dev
    docs = annotated_paragraph_docs(spacy.blank("en").vocab, block.read_text(encoding="utf8"))
    model = train_ud_pipeline("pipeline_mpnet.cfg", str(encoder), docs, tmp_path)
    nlp = spacy.load(model)
    scores = nlp.evaluate(examples_from_docs(nlp, docs[1:]))
    (tmp_path / "scores.json").write_text(json.dumps({"scores": scores}))
    shutil.rmtree(encoder)

    name = f"{PACKAGE_NAME}_trf"
    result = install_offline_and_parse(model, tmp_path / "scores.json", "ud_pipeline_trf", name, tmp_path)

    assert_scored_and_one_tree_a_sentence(result, scores)
    assert result["pipe_names"] == [*nlp.pipe_names] and nlp.pipe_names[:2] == ["transformer", "senter"]
    assert result["meta"]["name"] == name
    assert [source["name"] for source in result["meta"]["sources"]] == ["UD English-EWT 2.16", "all-mpnet-base-v2"]
    assert "all-mpnet-base-v2" in result["meta"]["description"] and "MiniLM" not in result["readme"]
    assert "fine-tuned from all-mpnet-base-v2 (Apache 2.0)" in result["readme"]
    assert result["sents"] and result["sents"][-1][1] == len(result["heads"])


@pytest.mark.slow
def test_package_test_passes_inside_a_virtualenv(tmp_path):
    """The README's test command run from a virtualenv: the package test's venv must see the virtualenv's packages.

    The virtualenv sees this environment through a .pth file, and holds one distribution of its own (MARKER)
    that the base interpreter lacks, as a virtualenv holds spaCy and torch where the base has none: a nested
    venv built with `--system-site-packages` misses it.
    """
    outer = tmp_path / "virtualenv"
    python = venv_seeing_this_environment(outer)
    dist_info = purelib(python) / f"{MARKER.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {MARKER}\nVersion: 1.0\n")
    (dist_info / "RECORD").write_text("")
    assert run(python, "-c", f"import importlib.metadata as m; print(m.version({MARKER!r}))", env=None).strip() == "1.0"
    test = f"{REPO / 'tests' / 'test_package.py'}::test_wheel_installs_offline_and_parses"
    args = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--basetemp", tmp_path / "pytest", test]
    result = subprocess.run([str(arg) for arg in args], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, f"inside {outer}:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    assert "1 passed" in result.stdout
