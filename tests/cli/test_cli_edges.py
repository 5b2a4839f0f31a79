"""The command line's small edges, each a one-line error or the expected behaviour."""

import io
import json
import multiprocessing
import os
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_pairatt.cli import main
from spacy_pairatt.evaluation.parser_eval import evaluate_pipeline
from spacy_pairatt.packaging.shipped_pipeline import assemble_pipeline
from spacy_pairatt.parse_files import parsing
from spacy_pairatt.parse_files.errors import ParseCommandError
from spacy_pairatt.parse_files.reading import read_documents
from tests.parse_files.test_parse_faults import REPO, assert_no_workers_left, fast_model  # noqa: F401 (fast_model: its fixture, shared)


def test_parse_into_a_reader_that_stops_early_exits_quietly(fast_model, tmp_path):  # noqa: F811
    """`parse ... | head -2`: the reader has what it wanted; no "Broken pipe", status 0."""
    source = tmp_path / "input.txt"
    source.write_text("".join(f"Line {i} is a sentence .\n" for i in range(3000)), encoding="utf8")
    command = f'"{sys.executable}" -m spacy_pairatt parse "{fast_model}" "{source}" --no-progress | head -2'
    for n_process in ("1", "2"):
        result = subprocess.run(
            ["bash", "-c", f"{command.replace('--no-progress', '--no-progress --n-process ' + n_process)}; "
             'echo "status ${PIPESTATUS[0]}" >&2'],
            capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
        assert len(result.stdout.splitlines()) == 2
        assert result.stderr.strip() == "status 0", result.stderr


def test_worker_processes_are_bounded_by_the_cpus_and_the_batches(fast_model, monkeypatch):  # noqa: F811
    """--n-process 99999 starts no more workers than the CPUs, and two lines (one batch) start one."""
    nlp = parsing.load_pipeline(fast_model)

    def most_workers(text: str, batch_size: int) -> int:
        sources = read_documents(io.BytesIO(text.encode()), "text")
        most = 0
        for _ in parsing.parse_docs(nlp, sources, batch_size=batch_size, n_process=99999):
            most = max(most, len(multiprocessing.active_children()))
        assert_no_workers_left()
        return most

    assert most_workers("One line .\nTwo lines .\n", 64) == 1
    monkeypatch.setattr(parsing, "usable_cpus", lambda: 3)
    assert most_workers("".join(f"Line {i} .\n" for i in range(40)), 2) == 3


def test_a_batch_size_too_large_for_python_is_one_line(fast_model, tmp_path, capsys):  # noqa: F811
    """Beyond what islice and deque take: argparse's one line (status 2), and parse_file's error."""
    source = tmp_path / "input.txt"
    source.write_text("One line .\n", encoding="utf8")
    with pytest.raises(SystemExit) as error:
        main(["parse", fast_model, str(source), "--batch-size", "99999999999999999999"])
    assert error.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("argument --batch-size: 99999999999999999999 is too large (at most 9223372036854775807)")
    )
    with pytest.raises(ParseCommandError, match="the batch size must be at most 9223372036854775807, got 1"):
        parsing.parse_file(fast_model, str(source), batch_size=10**19)


def saved_pipeline(path, *components) -> Doc:
    """A blank English pipeline of `components`, initialized on one two-sentence Doc and saved; the Doc."""
    nlp = spacy.blank("en")
    for name in components:
        nlp.add_pipe(name)
    words = "the cat sat . it ran".split()
    deps = ["det", "nsubj", "ROOT", "punct", "nsubj", "ROOT"]
    gold = Doc(nlp.vocab, words=words, heads=[1, 2, 2, 2, 5, 5], deps=deps, sent_starts=[1, 0, 0, 0, 1, 0])
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=words), gold)])
    nlp.to_disk(path)
    return gold


def test_evaluate_with_another_pipelines_senter_replaces_the_models_own(tmp_path):
    """`evaluate M --sentences PATH` where M has a senter: PATH's senter takes its place, where it was
    (spaCy's E007 before); a sentencizer goes in front, replacing the pipeline's own."""
    gold = saved_pipeline(tmp_path / "model", "parser", "senter")
    saved_pipeline(tmp_path / "segmenter", "senter")
    saved_pipeline(tmp_path / "no_senter", "parser")
    DocBin(docs=[gold]).to_disk(tmp_path / "dev.spacy")
    result = evaluate_pipeline(str(tmp_path / "model"), str(tmp_path / "dev.spacy"), str(tmp_path / "segmenter"))
    assert result["pipeline"] == ["parser", "senter"] and result["n_docs"] == 1
    # and a pipeline with a sentencizer of its own (as assemble adds) under --sentences sentencizer
    saved_pipeline(tmp_path / "assembled", "parser", "sentencizer")
    result = evaluate_pipeline(str(tmp_path / "assembled"), str(tmp_path / "dev.spacy"), "sentencizer")
    assert result["pipeline"] == ["sentencizer", "parser"]
    with pytest.raises(ValueError, match=r"the pipeline at .*no_senter has no senter \(its components: parser\)"):
        evaluate_pipeline(str(tmp_path / "model"), str(tmp_path / "dev.spacy"), str(tmp_path / "no_senter"))


def test_evaluate_refuses_a_corpus_that_is_not_a_docbin_in_one_line(fast_model, tmp_path, capsys):  # noqa: F811
    text, folder = tmp_path / "dev.conllu", tmp_path / "empty"
    text.write_text("1\tHi\t_\t_\t_\t_\t0\troot\t_\t_\n\n", encoding="utf8")
    folder.mkdir()
    for corpus, message in ((text, "is not a .spacy file"), (folder, "is a folder without .spacy files")):
        with pytest.raises(SystemExit, match=f"evaluate: error: {corpus}.* {message}") as error:
            main(["evaluate", "/no/such/model", str(corpus)])  # checked before the model loads
        assert "\n" not in error.value.code
    assert capsys.readouterr().err == ""  # no spaCy warning (W090) before it


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_output_names_its_path(fast_model, tmp_path):  # noqa: F811
    gold = tmp_path / "gold.conllu"
    gold.write_text("# text = Hi\n1\tHi\t_\t_\t_\t_\t0\troot\t_\tSpaceAfter=No\n\n", encoding="utf8")
    scores = tmp_path / "scores.json"
    keys = ("dep_uas", "dep_las", "dep_uas_punct", "dep_las_punct", "dep_single_tree")
    scores.write_text(json.dumps({"scores": dict.fromkeys(keys, 0.5), "words_per_second": 1000}))
    commands = (["ud-eval", str(gold), str(gold)], ["ud-text", str(gold)], ["demo", fast_model, "--text", "Hi ."],
                ["table", f"model:dev:{scores}"])  # fmt: skip
    for argv in commands:
        with pytest.raises(SystemExit) as error:
            main([*argv, "--output", "/dev/full"])
        assert error.value.code == f"python -m spacy_pairatt {argv[0]}: error: /dev/full: No space left on device"


def test_demo_of_a_blank_text_is_one_line(fast_model):  # noqa: F811
    for text in ("", " \t"):
        with pytest.raises(SystemExit) as error:
            main(["demo", fast_model, "--text", "A sentence .", "--text", text])
        assert error.value.code == f"python -m spacy_pairatt demo: error: --text {text!r} has no words to parse"


def test_assemble_into_an_existing_pipeline_folder_leaves_no_stale_files(fast_model, tmp_path):  # noqa: F811
    output = tmp_path / "shipped"
    assemble_pipeline(fast_model, str(output))
    (output / "dropped_component").mkdir()
    (output / "dropped_component" / "model").write_bytes(b"old weights")
    (output / "notes.txt").write_text("an earlier build's\n", encoding="utf8")
    assemble_pipeline(fast_model, str(output))
    assemble_pipeline(fast_model, str(tmp_path / "fresh"))
    assert sorted(path.name for path in output.iterdir()) == sorted(
        path.name for path in (tmp_path / "fresh").iterdir()
    )
    assert spacy.load(output).pipe_names == ["sentencizer", "parser", "pairatt_release_attention"]
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []  # no staging folder left
    # a folder that is not a pipeline is not replaced
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"notes holds files but no pipeline \(no config.cfg\): not replacing it"):
        assemble_pipeline(fast_model, str(notes))
    assert [path.name for path in notes.iterdir()] == ["keep.txt"]


def test_assemble_into_a_link_replaces_the_pipeline_it_names(fast_model, tmp_path):  # noqa: F811
    """The issue's case: `assemble M LINK` made LINK a folder and left the pipeline it names as it was."""
    shipped, link = tmp_path / "builds" / "shipped", tmp_path / "current"
    assemble_pipeline(fast_model, str(shipped))
    (shipped / "notes.txt").write_text("an earlier build's\n", encoding="utf8")
    link.symlink_to(shipped, target_is_directory=True)
    main(["assemble", fast_model, str(link), "--version", "9.9.9"])
    assert link.is_symlink() and os.readlink(link) == str(shipped)
    assert spacy.load(shipped).meta["version"] == "9.9.9" and not (shipped / "notes.txt").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["builds", "current"]
    assert [path.name for path in shipped.parent.iterdir()] == ["shipped"]


def test_a_parse_from_a_checkout_asks_git_nothing(fast_model, tmp_path):  # noqa: F811
    """Only a command that writes results names the code it ran (`git rev-parse`, `git status`): a parse
    from a checkout runs no git; `table`, which writes results, does (the fake git is seen)."""
    calls, fake = tmp_path / "git-calls", tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    fake.chmod(0o755)
    source = tmp_path / "in.txt"
    source.write_text("A sentence .\n")
    environ = {key: value for key, value in os.environ.items() if key != "SPACY_PAIRATT_SOURCE_STAMP"}
    environ["PATH"] = f"{fake.parent}{os.pathsep}{environ['PATH']}"

    def run(*argv):
        command = [sys.executable, "-m", "spacy_pairatt", *argv]
        return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=environ, timeout=300)

    parsed = run("parse", fast_model, str(source), "--no-progress")
    assert parsed.returncode == 0 and "\tsentence\t" in parsed.stdout, parsed.stderr
    assert not calls.exists()
    assert run("table", "not-a-spec").returncode == 1
    assert "rev-parse HEAD" in calls.read_text()
