"""`parse` under bad input and faults: no hang, no lost or clobbered output, one-line errors,
CoNLL-U that every reader reads for any text.

A fast pipeline stands in for a trained one: spaCy's sentencizer and an initialized (untrained)
transition parser, so these tests do not depend on the transformer components.
"""

import importlib.util
import io
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import conllu
import pytest
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.training.converters import conllu_to_docs

from spacy_pairatt.cli import main
from spacy_pairatt.parse_files.errors import ParseCommandError
from spacy_pairatt.parse_files.parsing import load_pipeline, parse_file, parse_stream
from spacy_pairatt.parse_files.reading import unescape_misc
from tests.conftest import PAPER, REPO

GOOD_LINES = [f"Line {i} is a short sentence ." for i in range(1, 201)]
# The case: 200 good lines, then one that is not UTF-8.
BAD_INPUT = ("\n".join(GOOD_LINES) + "\n").encode() + b"Caf\xe9 here.\nAfter it.\n"


def build_fast_pipeline() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("parser")
    words = "the cat sat on the mat".split()
    gold = Doc(nlp.vocab, words=words, heads=[1, 2, 2, 2, 5, 3], deps=["det", "nsubj", "ROOT", "prep", "det", "pobj"])
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=words), gold)])
    return nlp


@pytest.fixture(scope="module")
def fast_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("fast") / "model"
    build_fast_pipeline().to_disk(path)
    return str(path)


@pytest.fixture(scope="module")
def fast_nlp(fast_model):
    return load_pipeline(fast_model)


@Language.component("pairatt_test_faults")
def fault_injector(doc):
    """BOOM: the pipeline raises; DIE: the process is killed (only ever run in a worker process)."""
    if "BOOM" in doc.text:
        raise ValueError("injected failure")
    if "DIE" in doc.text:
        os.kill(os.getpid(), signal.SIGKILL)
    return doc


def run_cli(*args, timeout=120, preexec_fn=None):
    """The command in a fresh interpreter: only there does a hang at exit show."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "spacy_pairatt", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        preexec_fn=preexec_fn,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return result, time.monotonic() - start


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.strip()]


def assert_no_workers_left():
    assert multiprocessing.active_children() == []
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("QueueFeeder")]


def test_two_processes_stop_and_exit_on_an_input_error(fast_model, tmp_path):
    """The issue's hang: with --n-process 2 the command printed the error and never exited."""
    source = tmp_path / "input.txt"
    source.write_bytes(BAD_INPUT)
    output = tmp_path / "out.conllu"
    output.write_text("earlier result\n", encoding="utf8")
    result, seconds = run_cli("parse", fast_model, source, "--output", output, "--n-process", "2", "--no-progress")
    assert result.returncode == 1
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "line 201 is not UTF-8 text" in lines[0] and "200 documents parsed before the error" in lines[0]
    assert output.read_text(encoding="utf8") == "earlier result\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["input.txt", "out.conllu"]
    assert seconds < 60


def test_a_full_disk_mid_run_leaves_no_partial_file(fast_model, tmp_path):
    """RLIMIT_FSIZE makes the disk 'full' after 4 kB: the output's temporary file is removed."""

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    source = tmp_path / "input.txt"
    source.write_text("\n".join(GOOD_LINES) + "\n", encoding="utf8")
    output = tmp_path / "out.conllu"
    result, _ = run_cli("parse", fast_model, source, "--output", output, "--no-progress", preexec_fn=small_disk)
    assert result.returncode == 1
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "cannot write the output" in lines[0] and "File too large" in lines[0]
    assert "documents parsed before the error" in lines[0] and "was not written" in lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["input.txt"]


@pytest.mark.parametrize("n_process", [1, 2])
def test_a_failed_run_keeps_the_earlier_output(fast_model, tmp_path, n_process):
    source = tmp_path / "input.txt"
    source.write_bytes(BAD_INPUT)
    output = tmp_path / "out.conllu"
    output.write_text("earlier result\n", encoding="utf8")
    message = r"line 201 .*200 documents parsed before the error; .*out.conllu is unchanged"
    with pytest.raises(SystemExit, match=message):
        main(["parse", fast_model, str(source), "--output", str(output), "--n-process", str(n_process)])
    assert output.read_text(encoding="utf8") == "earlier result\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["input.txt", "out.conllu"]
    assert_no_workers_left()


def test_a_successful_run_replaces_the_output_and_keeps_its_mode(fast_model, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("One line .\n", encoding="utf8")
    output = tmp_path / "out.conllu"
    output.write_text("earlier result\n", encoding="utf8")
    output.chmod(0o640)
    main(["parse", fast_model, str(source), "--output", str(output), "--no-progress"])
    assert output.read_text(encoding="utf8").startswith("# sent_id = 1")
    assert output.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["input.txt", "out.conllu"]


@pytest.mark.parametrize("n_process", [1, 2])
def test_pipeline_errors_and_dead_workers_stop_the_run(fast_model, n_process):
    nlp = load_pipeline(fast_model)
    nlp.add_pipe("pairatt_test_faults", before="parser")
    text = "\n".join(GOOD_LINES[:30] + ["It goes BOOM here ."] + GOOD_LINES[30:]) + "\n"
    where = r"document 29 \(line 29\) to document 3[12] \(line 3[12]\)"  # the batch that holds line 31
    with pytest.raises(ParseCommandError, match=f"the pipeline failed on {where}: ValueError: injected failure"):
        parse_stream(nlp, io.BytesIO(text.encode()), io.StringIO(), batch_size=4, n_process=n_process)
    assert_no_workers_left()
    if n_process > 1:
        text = text.replace("BOOM", "DIE")
        with pytest.raises(ParseCommandError, match=f"a worker process was killed by signal 9 while parsing {where}"):
            parse_stream(nlp, io.BytesIO(text.encode()), io.StringIO(), batch_size=4, n_process=n_process)
        assert_no_workers_left()


@pytest.mark.parametrize("n_process", ["1", "2", "-1"])
def test_output_device_errors_are_one_line(fast_model, tmp_path, n_process):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(GOOD_LINES) + "\n", encoding="utf8")
    with pytest.raises(SystemExit, match=r"cannot write the output /dev/full: No space left on device") as error:
        main(["parse", fast_model, str(source), "--output", "/dev/full", "--n-process", n_process, "--no-progress"])
    assert "\n" not in str(error.value.code)
    assert_no_workers_left()


def test_output_and_input_paths_are_checked(fast_model, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("One line .\n", encoding="utf8")
    cases = {
        str(tmp_path / "no" / "such" / "out.conllu"): "there is no folder",
        str(tmp_path): "it is a directory",
    }
    for output, message in cases.items():
        with pytest.raises(SystemExit, match=f"cannot write the output .*{message}"):
            main(["parse", fast_model, str(source), "--output", output, "--no-progress"])
    with pytest.raises(SystemExit, match="cannot read the input .*: it is a directory"):
        main(["parse", fast_model, str(tmp_path), "--output", str(tmp_path / "out.conllu")])


@pytest.mark.parametrize(
    "option, value",
    [("--batch-size", "0"), ("--batch-size", "-5"), ("--n-process", "0"), ("--n-process", "-2"),
     ("--shard-size", "0"), ("--dask-workers", "0"), ("--batch-size", "many")],
)  # fmt: skip
def test_nonsense_options_are_refused_by_argparse(fast_model, tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as error:
        main(["parse", fast_model, str(tmp_path / "input.txt"), option, value])
    assert error.value.code == 2
    assert f"argument {option}:" in capsys.readouterr().err


def test_a_pipeline_without_a_parser_or_a_segmenter_is_refused(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler")
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "input.txt").write_text("One line .\n", encoding="utf8")
    message = "has no component that assigns heads or sentence starts .*entity_ruler.*needs a parser or a segmenter"
    with pytest.raises(SystemExit, match=message):
        main(["parse", str(tmp_path / "model"), str(tmp_path / "input.txt"), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_segmenter_alone_writes_sentences_without_syntax(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "input.txt").write_text("One line. Two here.\n", encoding="utf8")
    main(["parse", str(tmp_path / "model"), str(tmp_path / "input.txt"), "--output", str(tmp_path / "out.conllu")])
    sentences = [block.splitlines() for block in (tmp_path / "out.conllu").read_text(encoding="utf8").split("\n\n")]
    words = [[line.split("\t") for line in block if not line.startswith("#")] for block in sentences if block]
    assert [[row[1] for row in sentence] for sentence in words] == [["One", "line", "."], ["Two", "here", "."]]
    assert {(row[6], row[7]) for sentence in words for row in sentence} == {("_", "_")}


CONLLU_HEAD = "# sent_id = a\n1\tThe\t_\t_\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\t_\t_\t_\t0\troot\t_\t_\n\n"


@pytest.mark.parametrize(
    "block, message",
    [
        ("1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n2\t\t_\t_\t_\t_\t1\tdep\t_\t_\n", "line 6: empty FORM"),
        ("1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n3\tB\t_\t_\t_\t_\t1\tdep\t_\t_\n", "line 6: word ID 3 where 2 was expected"),
        ("2\tA\t_\t_\t_\t_\t0\troot\t_\t_\n", "line 5: word ID 2 where 1 was expected"),
        ("1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n1\tB\t_\t_\t_\t_\t1\tdep\t_\t_\n", "line 6: word ID 1 where 2 was expected"),
        ("0\tA\t_\t_\t_\t_\t0\troot\t_\t_\n", "line 5: word ID 0 where 1 was expected"),
        ("x\tA\t_\t_\t_\t_\t0\troot\t_\t_\n", "line 5: 'x' is not a valid ID"),
        ("2-3\tAB\t_\t_\t_\t_\t_\t_\t_\t_\n1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n",
         "line 5: multiword token 2-3 after word 0"),
        ("1-3\tAB\t_\t_\t_\t_\t_\t_\t_\t_\n1\tA\t_\t_\t_\t_\t0\troot\t_\t_\n2\tB\t_\t_\t_\t_\t1\tdep\t_\t_\n",
         "line 5: a multiword token ends at word 3 of a sentence of 2 words"),
        ("1\tA\t_\t_\t_\t_\t0\troot\n", "line 5: expected 10 tab-separated columns, found 8"),
    ],
)  # fmt: skip
def test_malformed_conllu_is_an_error_naming_the_line(fast_model, tmp_path, block, message):
    source = tmp_path / "input.conllu"
    source.write_text(CONLLU_HEAD + block, encoding="utf8")
    with pytest.raises(SystemExit, match=f"CoNLL-U {message}.*1 document parsed before the error") as error:
        main(["parse", fast_model, str(source), "--input-format", "conllu", "--output", str(tmp_path / "out")])
    assert "\n" not in str(error.value.code)
    assert not (tmp_path / "out").exists()


def test_bare_cr_line_endings_are_line_breaks(fast_nlp):
    output = io.StringIO()
    text = "First line .\rSecond line .\r\rThird\r\nFourth .\nFifth"
    assert parse_stream(fast_nlp, io.BytesIO(text.encode()), output, output_format="json") == 5
    records = [json.loads(line) for line in output.getvalue().split("\n") if line]
    assert [record["id"] for record in records] == ["1", "2", "4", "5", "6"]


def test_json_lines_stay_lines_for_any_text(fast_nlp):
    text = "a\u2028b\x85c\u2029d \x1c e\x0bf\x0cg\n"
    output = io.StringIO()
    parse_stream(fast_nlp, io.BytesIO(text.encode()), output, output_format="json")
    lines = output.getvalue().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["text"] == text[:-1]


def read_back(text):
    """The tokens of each sentence of CoNLL-U output, by spaCy's converter and by the conllu library.

    The text goes through universal newlines first, as when either reads a file.
    """
    text = io.StringIO(text, newline=None).read()
    if not text:
        return [], []  # spaCy's converter cannot read an empty file
    by_spacy = [[token.text for token in doc] for doc in conllu_to_docs(text, n_sents=1, no_print=True)]
    by_conllu = []
    for sentence in conllu.parse(text):
        words = []
        for token in sentence.filter(id=lambda token_id: isinstance(token_id, int)):
            misc = token["misc"] or {}
            words.append(unescape_misc(misc["SpacesInToken"]) if "SpacesInToken" in misc else token["form"])
        by_conllu.append(words)
        # every line is a word or a multiword token's line (`2-3 don't`) before its words
        assert all(isinstance(token["id"], int) or token["id"][1] == "-" for token in sentence)
    return by_spacy, by_conllu


def text_from_conllu(text):
    """The text that CoNLL-U output gives back, read by the conllu library: each token (a multiword
    token whole) with SpacesBefore, SpacesAfter or SpaceAfter=No, UDPipe's reading of MISC."""
    parts = []
    for sentence in conllu.parse(io.StringIO(text, newline=None).read()):
        multiword_end = 0
        for token in sentence:
            token_id, misc = token["id"], token["misc"] or {}
            last = token_id[2] if isinstance(token_id, tuple) else token_id
            if last <= multiword_end:
                continue
            multiword_end = last
            form = unescape_misc(misc["SpacesInToken"]) if "SpacesInToken" in misc else token["form"]
            after = "" if misc.get("SpaceAfter") == "No" else " "
            parts += [unescape_misc(misc.get("SpacesBefore", "")), form, unescape_misc(misc.get("SpacesAfter", after))]
    return "".join(parts)


LINE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE_TEXT, min_size=1, max_size=6), endings=st.lists(st.sampled_from(["\n", "\r\n", "\r"])))
def test_any_unicode_lines_give_conllu_that_readers_read_back(fast_nlp, lines, endings):
    text = "".join(line + (endings[i % len(endings)] if endings else "\n") for i, line in enumerate(lines))
    output = io.StringIO()
    n_docs = parse_stream(fast_nlp, io.BytesIO(text.encode()), output)
    written = output.getvalue()
    documents = [line for line in lines if line.strip()]
    assert n_docs == len(documents)
    assert written.splitlines() == written.split("\n")[:-1]  # no line break but "\n"
    assert all(len(line.split("\t")) == 10 for line in written.split("\n") if line and not line.startswith("#"))
    by_spacy, by_conllu = read_back(written)
    assert len(by_conllu) >= len(documents)
    # the same tokens but whitespace, which is no word: spaCy's reader sees FORM (pictures for
    # whitespace inside a token), SpacesInToken gives the text back
    expected = [token.text for line in documents for token in fast_nlp.make_doc(line) if not token.is_space]
    assert [word for words in by_conllu for word in words] == expected
    assert [len(words) for words in by_spacy] == [len(words) for words in by_conllu]
    assert all(word.strip() for words in by_spacy for word in words)
    # and the words with their MISC give back every document's text, whitespace included
    assert text_from_conllu(written) == "".join(documents)


def test_conllu_output_read_as_input_gives_the_same_tokens(fast_nlp, tmp_path):
    text = "Tab\there  two  spaces\u2028 and\x85 a line \u00a0 break .\n"
    first = io.StringIO()
    parse_stream(fast_nlp, io.BytesIO(text.encode()), first)
    second = io.StringIO()
    parse_stream(fast_nlp, io.BytesIO(first.getvalue().encode()), second, input_format="conllu")
    assert second.getvalue() == first.getvalue()
    words = [t.text for t in fast_nlp.make_doc(text[:-1]) if not t.is_space]
    assert [w for ws in read_back(first.getvalue())[1] for w in ws] == words
    assert text_from_conllu(first.getvalue()) == text[:-1]


def test_two_processes_give_the_same_output_as_one(fast_nlp):
    text = "\n".join(f"Line {i} : " + "word " * (i % 13) for i in range(97)).encode()
    outputs = []
    for n_process, batch_size in ((1, 64), (2, 5), (2, 1), (3, 7)):
        output = io.StringIO()
        assert parse_stream(fast_nlp, io.BytesIO(text), output, batch_size=batch_size, n_process=n_process) == 97
        outputs.append(output.getvalue())
    assert all(output == outputs[0] for output in outputs[1:])
    assert_no_workers_left()


def test_parse_file_checks_its_counts(fast_model, tmp_path):
    for options in ({"batch_size": 0}, {"n_process": 0}, {"batch_size": -3}):
        with pytest.raises(ParseCommandError, match="must be at least 1"):
            parse_file(fast_model, str(tmp_path / "input.txt"), **options)


def test_missing_files_and_models_in_other_commands_are_one_line(fast_model, tmp_path, monkeypatch):
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    missing = str(tmp_path / "missing")
    cases = [
        (["evaluate", fast_model, missing + ".spacy"], "evaluate: error: there is no corpus at .*missing.spacy"),
        (["evaluate", missing, missing], "evaluate: error: there is no corpus"),
        (["demo", missing], "demo: error: .*Can't find model"),
        (["semeval-evaluate", missing, missing], "semeval-evaluate: error: .*Can't find model"),
        (["table", f"a:dev:{missing}.json"], "table: error: .*missing.json: No such file or directory"),
        (["table", "no-colons"], "table: error: 'no-colons' is not NAME:SPLIT:PATH"),
        (["relations-table", f"a:{missing}.json"], "relations-table: error: .*missing.json: No such file"),
        (["assemble", missing, str(tmp_path / "out")], "assemble: error: .*Can't find model"),
        (["semeval-convert", missing, str(tmp_path / "out")], "semeval-convert: error: .*No such file"),
        (["docred-convert", missing, str(tmp_path / "out")], "docred-convert: error: .*No such file"),
        (["ptb-convert", missing, str(tmp_path / "out")], "ptb-convert: error: no dependency_treebank"),
    ]  # fmt: skip
    not_json, no_metrics, no_lemmas = (tmp_path / name for name in ("not.json", "scores.json", "partial.json"))
    not_json.write_text("UPOS 96.1\n", encoding="utf8")
    no_metrics.write_text(json.dumps({"scores": {"dep_las": 0.85}}), encoding="utf8")
    no_lemmas.write_text(json.dumps({"metrics": {"UPOS": {"f1": 0.96}}}), encoding="utf8")
    assemble = ["assemble", fast_model, str(tmp_path / "out")]
    cases += [
        ([*assemble, "--ud-scores", missing], "assemble: error: .*missing: No such"),
        ([*assemble, "--ud-scores", str(not_json)],
         "assemble: error: .*not.json: not JSON .*ud-eval --output"),
        ([*assemble, "--ud-scores", str(no_metrics)],
         "assemble: error: .*scores.json: no \"metrics\" object; expected the output of .*ud-eval --output"),
        ([*assemble, "--ud-scores", str(no_lemmas)],
         "assemble: error: .*partial.json: no XPOS, UFeats, Lemmas under \"metrics\""),
        ([*assemble, "--accuracy", str(no_lemmas)],
         "assemble: error: .*partial.json: no \"scores\" object; expected the output of .*evaluate --output"),
        ([*assemble, "--sentence-scores", str(no_lemmas)],
         "assemble: error: .*partial.json: no Sentences under \"metrics\""),
        ([*assemble, "--sentence-scores", str(not_json)],
         "assemble: error: .*not.json: not JSON .*ud-eval --output"),
    ]  # fmt: skip
    for command in ("fetch-ud", "fetch-ptb", "fetch-semeval", "fetch-docred"):
        cases.append(
            ([command, str(tmp_path / command), "--local", missing], f"the --local folder {missing} does not exist")
        )
    for argv, message in cases:
        with pytest.raises(SystemExit, match=message) as error:
            main(argv)
        assert isinstance(error.value.code, str) and "\n" not in error.value.code, argv
    assert not (tmp_path / "out").exists()  # nothing written by an assemble that failed


def test_reliability_fuzz_sample(fast_model, tmp_path):
    """A bounded sample of bench/reliability.py (its full run: results/reliability.md): nothing hangs,
    no traceback, no document lost, every outcome as the input calls for."""
    spec = importlib.util.spec_from_file_location("reliability_bench", PAPER / "bench" / "reliability.py")
    reliability = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reliability)
    result = reliability.run_fuzz(
        model=fast_model,
        cases=120,
        seed=21,
        subprocess_cases=0,
        disk_full_cases=False,
        workdir=tmp_path,
        signal_cases=2,
    )
    assert result["cases"] == 122 and len(result["cases_by_kind"]) > 8
    counts = {metric: result[metric] for metric in reliability.METRICS}
    assert counts == dict.fromkeys(reliability.METRICS, 0), result["samples"]
