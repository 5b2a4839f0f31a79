"""`python -m spacy_pairatt parse` and its Dask scale-out on a tiny trained pipeline saved to disk.

The parses only need to be deterministic, not good: two epochs on 50 UD sentences.
"""

import json
import random
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin
from thinc.api import Adam, fix_random_seed

from spacy_pairatt.cli import main
from spacy_pairatt.parse_files.reading import unescape_misc
from spacy_pairatt.parse_files.writing import conllu_blocks
from tests.conftest import REPO, UD_DIR, examples_from_docs, make_pipeline, write_first_sentences

TEXTS = [
    "The quick brown fox jumps over the lazy dog. It didn't even look back!",
    "",
    "I   saw   her   yesterday .",
    "Short one",
    "Ελληνικά and 中文 in one line.",
]
N_DEV_SENTENCES = 30


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, ud_train_docs, tmp_path_factory):
    """A sentencizer in front, so a line of text can hold several sentences."""
    fix_random_seed(0)
    random.seed(0)
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:50])
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-3)
    for _ in range(2):
        for batch in spacy.util.minibatch(examples, 10):
            nlp.update(batch, sgd=optimizer)
    nlp.add_pipe("sentencizer", first=True)
    path = tmp_path_factory.mktemp("parse") / "model"
    nlp.to_disk(path)
    return str(path)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("parse") / "input.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    return str(path)


@pytest.fixture(scope="module")
def dev_file(tmp_path_factory):
    """The first sentences of EWT dev, multiword tokens (didn't, Today's) included."""
    source = UD_DIR / "en_ewt-ud-dev.conllu"
    if not source.exists():
        pytest.skip(f"UD English-EWT not found at {source}")
    return str(write_first_sentences(source, N_DEV_SENTENCES, tmp_path_factory.mktemp("parse") / "dev.conllu"))


def parse(model, input_path, output, *options):
    main(["parse", model, str(input_path), "--output", str(output), "--no-progress", *options])
    return output.read_text(encoding="utf8")


def conllu_sentences(text):
    """[(comments as a dict, word rows as column lists)] for each block, checking it is a valid tree
    (multiword token lines, `2-3 don't`, are left out)."""
    sentences = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        comments = dict(line[2:].split(" = ", 1) for line in lines if line.startswith("# "))
        rows = [line.split("\t") for line in lines if not line.startswith("#") and "-" not in line.split("\t")[0]]
        assert all(len(row) == 10 for row in rows)
        assert [row[0] for row in rows] == [str(i) for i in range(1, len(rows) + 1)]
        assert all(0 <= int(row[6]) <= len(rows) for row in rows)
        assert [row[6] for row in rows].count("0") == 1
        assert [row[7] for row in rows if row[6] == "0"] == ["root"]
        sentences.append((comments, rows))
    return sentences


def token_text(row):
    """A CoNLL-U row's token text: FORM, or SpacesInToken where the FORM has pictures for whitespace."""
    misc = dict(part.split("=", 1) for part in row[9].split("|") if "=" in part)
    return unescape_misc(misc["SpacesInToken"]) if "SpacesInToken" in misc else row[1]


def input_sentences(path):
    """[(comments, FORMs of the words, multiword token lines)] of a CoNLL-U file, read without spaCy."""
    sentences = []
    for block in open(path, encoding="utf8").read().strip("\n").split("\n\n"):
        lines = block.split("\n")
        comments = dict(line[2:].split(" = ", 1) for line in lines if line.startswith("# "))
        rows = [line.split("\t") for line in lines if not line.startswith("#")]
        multiword = [line for line in lines if "-" in line.split("\t")[0]]
        sentences.append((comments, [row[1] for row in rows if row[0].isdigit()], multiword))
    return sentences


def token_texts(text):
    """Each block's text from its tokens (multiword tokens whole) and their SpaceAfter."""
    texts = []
    for block in text.strip("\n").split("\n\n"):
        parts, multiword_end = [], 0
        for row in (line.split("\t") for line in block.split("\n") if not line.startswith("#")):
            first, _, last = row[0].partition("-")
            if int(first) > multiword_end:
                parts.append(row[1] + ("" if "SpaceAfter=No" in row[9] else " "))
                multiword_end = int(last or first)
        texts.append("".join(parts).strip())
    return texts


def test_text_to_conllu_matches_nlp_pipe(model_dir, text_file, tmp_path):
    sentences = conllu_sentences(parse(model_dir, text_file, tmp_path / "out.conllu"))
    nlp = spacy.load(model_dir)
    expected = []
    for line_number, doc in zip((1, 3, 4, 5), nlp.pipe(text for text in TEXTS if text)):
        sents = [sent for sent in doc.sents if not all(t.is_space for t in sent)]
        for k, sent in enumerate(sents, 1):
            sent_id = str(line_number) if len(sents) == 1 else f"{line_number}-{k}"
            words = [t for t in sent if not t.is_space]
            # heads where the head is a word (see test_ud_whitespace.py for whitespace heads)
            heads = [0 if t.head.i == t.i else words.index(t.head) + 1 if not t.head.is_space else None for t in words]
            expected.append((sent_id, sent.text.strip(), [t.text for t in words], heads, [t.dep_ for t in words]))
    assert [s[0] for s in expected][:2] == ["1-1", "1-2"]
    assert [
        (
            comments["sent_id"],
            comments["text"],
            [token_text(row) for row in rows],
            [int(row[6]) if head is not None else None for row, head in zip(rows, heads)],
            ["ROOT" if row[6] == "0" else row[7] for row in rows],
        )
        for (comments, rows), (*_, heads, _) in zip(sentences, expected)
    ] == expected
    # whitespace is no word: the words carry it in MISC (SpacesAfter, UDPipe's escapes)
    rows = next(rows for comments, rows in sentences if comments["sent_id"] == "3")
    assert [row[1] for row in rows[:3]] == ["I", "saw", "her"]
    assert rows[0][9].split("|")[0] == "SpacesAfter=\\s\\s\\s"


def test_conllu_input_keeps_tokenisation_comments_and_sentences(model_dir, dev_file, tmp_path):
    output = parse(model_dir, dev_file, tmp_path / "out.conllu", "--input-format", "conllu")
    sentences = conllu_sentences(output)
    original = input_sentences(dev_file)
    assert len(sentences) == N_DEV_SENTENCES
    assert [comments for comments, _ in sentences] == [comments for comments, _, _ in original]
    assert [[row[1] for row in rows] for _, rows in sentences] == [words for _, words, _ in original]
    # the treebank's multiword tokens (didn't, Today's) come back as multiword token lines
    assert [[line.split("\t")[:2] for line in multiword] for *_, multiword in original] == [
        [line.split("\t")[:2] for line in multiword] for _, _, multiword in input_sentences(tmp_path / "out.conllu")
    ]
    # the tokens and their SpaceAfter give back the sentence's text
    assert token_texts(output) == [comments["text"] for comments, _ in sentences]


def test_json_output_has_the_conllu_parses(model_dir, text_file, tmp_path):
    output = parse(model_dir, text_file, tmp_path / "out.jsonl", "--output-format", "json")
    records = [json.loads(line) for line in output.splitlines()]
    assert [record["id"] for record in records] == ["1", "3", "4", "5"]
    assert [record["text"] for record in records] == [text for text in TEXTS if text]
    conllu = conllu_sentences(parse(model_dir, text_file, tmp_path / "out.conllu"))
    heads = []  # of the words (JSON keeps whitespace tokens, CoNLL-U writes no word for them)
    for record in records:
        starts = [t["i"] for t in record["tokens"] if t["is_sent_start"]]
        for start, end in zip(starts, starts[1:] + [len(record["tokens"])]):
            words = [t for t in record["tokens"][start:end] if not t["text"].isspace()]
            numbers = {t["i"]: k for k, t in enumerate(words, 1)}
            if words:  # a head that is whitespace: see test_ud_whitespace.py
                heads.append([0 if t["head"] == t["i"] else numbers.get(t["head"]) for t in words])
    assert heads == [
        [int(row[6]) if head is not None else None for row, head in zip(rows, sentence_heads)]
        for (_, rows), sentence_heads in zip(conllu, heads)
    ]
    confidence = {"head_prob", "dep_prob", "head_candidates"}  # the parser stores its confidence by default
    assert set(records[0]["tokens"][0]) == {"i", "text", "head", "dep", "is_sent_start"} | confidence
    tokens = [token for record in records for token in record["tokens"]]
    assert all(0 < token["head_prob"] <= 1 for token in tokens if token["text"].strip())
    assert all(token["head_prob"] is None for token in tokens if not token["text"].strip())  # whitespace: no word


def test_two_processes_give_the_same_output(model_dir, dev_file, tmp_path):
    options = ["--input-format", "conllu", "--batch-size", "4"]
    one = parse(model_dir, dev_file, tmp_path / "one.conllu", *options)
    two = parse(model_dir, dev_file, tmp_path / "two.conllu", *options, "--n-process", "2")
    assert two == one


def test_two_processes_exit_after_an_input_error(model_dir, tmp_path):
    """200 good lines, then one that is not UTF-8; with 2 processes the command hung at exit."""
    source = tmp_path / "input.txt"
    source.write_bytes(("\n".join([TEXTS[3]] * 200) + "\n").encode() + b"Caf\xe9 here.\n")
    output = tmp_path / "out.conllu"
    command = [sys.executable, "-m", "spacy_pairatt", "parse", model_dir, str(source), "--output", str(output)]
    result = subprocess.run(command + ["--n-process", "2"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "line 201 is not UTF-8 text" in result.stderr and "200 documents parsed before the error" in result.stderr
    assert not output.exists() and [path.name for path in tmp_path.iterdir()] == ["input.txt"]


def test_clear_errors(model_dir, dev_file, tmp_path):
    lines = open(dev_file, encoding="utf8").read().split("\n")
    lines[9] = "\t".join(lines[9].split("\t")[:3])  # line 10: the third word of the second sentence
    broken = tmp_path / "broken.conllu"
    broken.write_text("\n".join(lines), encoding="utf8")
    with pytest.raises(SystemExit, match="CoNLL-U line 10: expected 10 tab-separated columns, found 3"):
        parse(model_dir, broken, tmp_path / "out.conllu", "--input-format", "conllu")
    with pytest.raises(SystemExit, match="cannot read the input .*missing.txt: No such file"):
        parse(model_dir, tmp_path / "missing.txt", tmp_path / "out.conllu")
    with pytest.raises(SystemExit, match="cannot load the pipeline 'no_such_model'"):
        parse("no_such_model", dev_file, tmp_path / "out.conllu")
    with pytest.raises(SystemExit, match="docbin output is one DocBin per Dask shard"):
        parse(model_dir, dev_file, tmp_path / "out.spacy", "--output-format", "docbin")
    with pytest.raises(SystemExit, match="give a file, not stdin"):
        parse(model_dir, "-", tmp_path / "shards", "--dask-workers", "2")


def test_dask_shards_concatenate_to_the_single_process_output(model_dir, dev_file, tmp_path):
    """A LocalCluster of 2 processes started by the command: CoNLL-U shards."""
    single = parse(model_dir, dev_file, tmp_path / "single.conllu", "--input-format", "conllu", "--batch-size", "7")
    options = ["--input-format", "conllu", "--batch-size", "7", "--shard-size", "7", "--dask-workers", "2"]
    main(["parse", model_dir, dev_file, "--output", str(tmp_path / "shards"), "--no-progress", *options])
    shards = sorted((tmp_path / "shards").iterdir())
    assert [path.name for path in shards] == [f"shard-0000{i}.conllu" for i in range(5)]
    assert "".join(path.read_text(encoding="utf8") for path in shards) == single


def test_dask_docbin_shards_on_an_existing_cluster(model_dir, text_file, tmp_path):
    from dask.distributed import LocalCluster

    from spacy_pairatt.parse_files.distributed import parse_shards

    single = parse(model_dir, text_file, tmp_path / "single.conllu", "--batch-size", "2")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        shards = parse_shards(
            model_dir,
            text_file,
            str(tmp_path / "shards"),
            output_format="docbin",
            shard_size=2,
            batch_size=2,
            scheduler_address=cluster.scheduler_address,
        )
    assert [path.name for path in shards] == ["shard-00000.spacy", "shard-00001.spacy"]
    nlp = spacy.blank("en")
    docs = [doc for path in shards for doc in DocBin().from_disk(path).get_docs(nlp.vocab)]
    assert "".join(conllu_blocks(doc) for doc in docs) == single


def test_another_registered_tokenizer_replaces_the_pipelines(model_dir, tmp_path):
    """--tokenizer: the pipeline (spaCy's English tokenizer) parses with the UD English one instead, which
    keeps EWT's `e-mail` whole, in one process and on Dask workers; a name no registry knows is a one-line error."""
    text = tmp_path / "hyphen.txt"
    text.write_text("Send me an e-mail today.\n", encoding="utf8")

    def forms(*options):
        return [
            token_text(row)
            for _, rows in conllu_sentences(parse(model_dir, text, tmp_path / "out.conllu", *options))
            for row in rows
        ]

    ud_tokenizer = ["--tokenizer", "spacy-pairatt.ud_english_tokenizer.v1"]
    assert forms()[3:6] == ["e", "-", "mail"]
    assert forms(*ud_tokenizer)[3:5] == ["e-mail", "today"]
    single = (tmp_path / "out.conllu").read_text(encoding="utf8")
    main(
        [
            "parse",
            model_dir,
            str(text),
            "--output",
            str(tmp_path / "shards"),
            "--no-progress",
            *ud_tokenizer,
            "--dask-workers",
            "1",
        ]
    )
    assert "".join(path.read_text(encoding="utf8") for path in sorted((tmp_path / "shards").iterdir())) == single
    with pytest.raises(SystemExit, match="no registered tokenizer 'no.such.tokenizer.v1'"):
        parse(model_dir, text, tmp_path / "out.conllu", "--tokenizer", "no.such.tokenizer.v1")


def test_paragraphs_input_makes_a_document_of_each_paragraph_and_keeps_its_line_breaks(model_dir, tmp_path):
    """EWT dev paragraphs as `ud-text` writes them, each wrapped at 60 characters as plain text is:
    one document per paragraph (so a paragraph break always ends a sentence), its text the
    paragraph with its line breaks, its id the number of its first line."""
    import textwrap

    from spacy_pairatt.corpora.ud_documents import raw_text

    paragraphs = [
        line
        for line in raw_text((UD_DIR / "en_ewt-ud-dev.conllu").read_text(encoding="utf8").splitlines()).splitlines()
        if line
    ][:40]
    wrapped = ["\n".join(textwrap.wrap(paragraph, 60)) for paragraph in paragraphs]
    source = tmp_path / "paragraphs.txt"
    source.write_text("\n\n".join(wrapped) + "\n", encoding="utf8")
    (tmp_path / "out.jsonl").unlink(missing_ok=True)
    main(
        [
            "parse",
            model_dir,
            str(source),
            "--input-format",
            "paragraphs",
            "--output-format",
            "json",
            "--output",
            str(tmp_path / "out.jsonl"),
            "--no-progress",
        ]
    )
    documents = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf8").splitlines()]
    assert [document["text"] for document in documents] == wrapped
    first_lines = [1]
    for text in wrapped[:-1]:
        first_lines.append(first_lines[-1] + text.count("\n") + 2)
    assert [document["id"] for document in documents] == [str(line) for line in first_lines]
