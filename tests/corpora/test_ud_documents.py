"""CoNLL-U as raw text (spacy_pairatt/corpora/ud_documents.py): documents, paragraphs and sentences
of UD English-EWT dev, the text `ud-text` writes and the training Docs `ud-docs` writes."""

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs

from spacy_pairatt.cli import main
from spacy_pairatt.corpora.ud_documents import (
    PARAGRAPH_BREAK,
    annotated_paragraph_docs,
    document_doc,
    paragraph_starts,
    paragraph_text,
    raw_text,
    read_ud_documents,
)
from spacy_pairatt.evaluation.ud_treebank import load_conllu
from tests.conftest import UD_DIR

EWT_DEV = UD_DIR / "en_ewt-ud-dev.conllu"


@pytest.fixture(scope="module")
def dev_lines():
    if not EWT_DEV.exists():
        pytest.skip(f"UD English-EWT not found at {EWT_DEV}")
    return EWT_DEV.read_text(encoding="utf8").splitlines(True)


def comment_count(lines, key):
    return sum(line.split("=")[0].split()[1:2] == [key] for line in lines if line.startswith("#"))


def test_ewt_dev_documents_paragraphs_and_sentences_are_the_files(dev_lines):
    documents = read_ud_documents(dev_lines)
    paragraphs = [paragraph for document in documents for paragraph in document]
    sentences = [sentence for paragraph in paragraphs for sentence in paragraph]
    assert len(documents) == comment_count(dev_lines, "newdoc")
    assert len(paragraphs) == comment_count(dev_lines, "newpar")
    assert len(sentences) == comment_count(dev_lines, "sent_id")
    # every word once, multiword tokens as their words, and the text is the gold text
    gold = load_conllu(EWT_DEV)
    assert sum(len(sentence.words) for sentence in sentences) == len(gold)
    assert "".join(word for sentence in sentences for word in sentence.words) == gold.text


def test_ud_text_writes_a_paragraph_a_line_and_a_blank_line_between_documents(dev_lines, tmp_path):
    main(["ud-text", str(EWT_DEV), "--output", str(tmp_path / "dev.txt")])
    text = (tmp_path / "dev.txt").read_text(encoding="utf8")
    assert text == raw_text(dev_lines)
    blocks = text.split("\n\n")
    assert len(blocks) == comment_count(dev_lines, "newdoc")
    assert sum(len(block.strip("\n").split("\n")) for block in blocks) == comment_count(dev_lines, "newpar")
    assert "".join(text.split()) == load_conllu(EWT_DEV).text


def test_paragraph_starts_are_the_sentences_with_newpar_or_newdoc(dev_lines):
    blocks = "".join(dev_lines).strip().split("\n\n")
    expected = [
        number for number, block in enumerate(blocks) if "\n# newpar" in "\n" + block or "\n# newdoc" in "\n" + block
    ]
    starts = paragraph_starts(read_ud_documents(dev_lines))
    assert starts == expected and starts[0] == 0 and len(starts) == comment_count(dev_lines, "newpar")


def test_ud_docs_writes_documents_with_a_blank_line_between_paragraphs(dev_lines, tmp_path):
    main(["ud-docs", str(EWT_DEV), str(tmp_path / "dev.spacy")])
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(nlp.vocab))
    documents = read_ud_documents(dev_lines)
    assert len(docs) == len(documents)
    breaks = [token for doc in docs for token in doc if token.text == PARAGRAPH_BREAK]
    assert len(breaks) == sum(len(document) - 1 for document in documents)
    assert not any(token.is_sent_start for token in breaks)
    assert all(doc[token.i + 1].is_sent_start for doc in docs for token in doc if token.text == PARAGRAPH_BREAK)
    assert sum(len(list(doc.sents)) for doc in docs) == comment_count(dev_lines, "sent_id")
    assert "".join("".join(doc.text.split()) for doc in docs) == load_conllu(EWT_DEV).text


def test_ud_docs_paragraphs_writes_each_paragraph_as_parse_reads_it_with_every_annotation(dev_lines, tmp_path):
    """The UD pipeline's training Docs: a Doc per paragraph whose text is the line `ud-text` writes
    for it, every sentence's tags, morphology, lemmas and tree those of spaCy's one-sentence conversion."""
    main(["ud-docs", str(EWT_DEV), str(tmp_path / "dev.spacy"), "--paragraphs"])
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(spacy.blank("en").vocab))
    paragraphs = [paragraph for document in read_ud_documents(dev_lines) for paragraph in document]
    assert len(docs) == len(paragraphs) == comment_count(dev_lines, "newpar")
    assert [" ".join(doc.text.split()) for doc in docs] == [paragraph_text(paragraph) for paragraph in paragraphs]
    assert not any(doc[-1].whitespace_ or token.is_space for doc in docs for token in doc)
    for attr in ("TAG", "POS", "MORPH", "LEMMA", "DEP", "SENT_START"):
        assert all(doc.has_annotation(attr) for doc in docs), attr
    sentences = [sentence for doc in docs for sentence in doc.sents]
    gold = list(conllu_to_docs("".join(dev_lines), n_sents=1, no_print=True))
    assert len(sentences) == len(gold) == comment_count(dev_lines, "sent_id")
    for sentence, reference in zip(sentences, gold):
        rows = [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i - sentence.start) for t in sentence]
        assert rows == [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i) for t in reference]


def test_paragraphs_spacys_converter_cannot_read_are_a_value_error_naming_it(tmp_path):
    """A block of comments alone (a `# newpar` with no sentence after it) breaks spaCy's converter
    deep inside; ud-docs --paragraphs says so in one line and writes nothing."""
    sentence = "# newpar\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"
    assert len(annotated_paragraph_docs(spacy.blank("en").vocab, sentence)) == 1
    (tmp_path / "bad.conllu").write_text(sentence + "# newpar\n\n", encoding="utf8")
    with pytest.raises(SystemExit, match="ud-docs: error: .*bad.conllu: spaCy's CoNLL-U converter cannot read it"):
        main(["ud-docs", str(tmp_path / "bad.conllu"), str(tmp_path / "out.spacy"), "--paragraphs"])
    assert not (tmp_path / "out.spacy").exists()


def test_a_multiword_token_is_its_words_with_the_tokens_spacing():
    lines = [
        "# newdoc id = a", "# text = I don't know",
        "1\tI\t_\t_\t_\t_\t3\tnsubj\t_\t_",
        "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",
        "2\tdo\t_\t_\t_\t_\t4\taux\t_\t_",
        "3\tn't\t_\t_\t_\t_\t4\tadvmod\t_\t_",
        "4\tknow\t_\t_\t_\t_\t0\troot\t_\tSpaceAfter=No",
        "",
    ]  # fmt: skip
    (document,) = read_ud_documents(lines)
    (sentence,) = document[0]
    assert sentence.words == ["I", "do", "n't", "know"] and sentence.spaces == [True, False, True, False]
    doc = document_doc(spacy.blank("en").vocab, document)
    assert doc.text == "I don't know"


@pytest.mark.parametrize(
    "line, message", [("1\tword\t_", "line 1 has 3 columns"), ("x\tword" + "\t_" * 8, "line 1 has the ID 'x'")]
)
def test_a_malformed_line_is_a_value_error_naming_it(line, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        read_ud_documents([line])
    (tmp_path / "bad.conllu").write_text(line + "\n", encoding="utf8")
    with pytest.raises(SystemExit, match=f"ud-docs: error: .*bad.conllu: {message}"):
        main(["ud-docs", str(tmp_path / "bad.conllu"), str(tmp_path / "out.spacy")])
    assert not (tmp_path / "out.spacy").exists()


def test_ud_docs_refuses_to_write_over_its_input_and_leaves_no_scratch(dev_lines, tmp_path):
    source = tmp_path / "dev.conllu"
    source.write_text("".join(dev_lines)[:20000].rsplit("\n\n", 1)[0] + "\n\n", encoding="utf8")
    before = source.read_bytes()
    with pytest.raises(SystemExit, match="ud-docs: error: the output .*dev.conllu is the input"):
        main(["ud-docs", str(source), str(source)])
    assert source.read_bytes() == before
    main(["ud-docs", str(source), str(tmp_path / "out.spacy")])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dev.conllu", "out.spacy"]


def test_ud_docs_of_a_file_without_sentences_is_a_one_line_error(tmp_path):
    (tmp_path / "empty.conllu").write_text("# only a comment\n\n", encoding="utf8")
    with pytest.raises(SystemExit, match="ud-docs: error: .*empty.conllu holds no sentences"):
        main(["ud-docs", str(tmp_path / "empty.conllu"), str(tmp_path / "out.spacy")])
    assert not (tmp_path / "out.spacy").exists()
