"""Whitespace the UD way. Spaces, tabs and no-break spaces at the ends of a line or
repeated are no words: CoNLL-U output keeps them in MISC (SpacesBefore, SpacesAfter), scores against
a gold file of the same text, and reads back into the same text."""

import io
import json

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc

from spacy_pairatt.cli import main
from spacy_pairatt.parse_files.errors import ParseCommandError
from spacy_pairatt.parse_files.parsing import parse_stream
from spacy_pairatt.parse_files.reading import SOURCE_KEY, numbered_lines, read_conllu_sources
from spacy_pairatt.parse_files.writing import conllu_blocks
from tests.parse_files.test_parse_faults import text_from_conllu

# (text of one line, its gold sentences' words)
WHITESPACE_LINES = [
    ("  Leading blanks .", [["Leading", "blanks", "."]]),
    ("Trailing ones .  ", [["Trailing", "ones", "."]]),
    ("Repeated   spaces\tand \t tabs .", [["Repeated", "spaces", "and", "tabs", "."]]),
    ("\u00a0No\u00a0\u00a0break marks .\u00a0", [["No", "break", "marks", "."]]),
    ("\t One here .  \t  Two there .  ", [["One", "here", "."], ["Two", "there", "."]]),
]


def gold_conllu(sentences) -> str:
    """A gold file of the given sentences' words (the first word the root, the others its children)."""
    blocks = []
    for words in sentences:
        rows = [f"{i}\t{word}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                for i, word in enumerate(words, 1)]  # fmt: skip
        blocks.append("\n".join(rows) + "\n\n")
    return "".join(blocks)


def parsed(nlp, text: str, input_format: str = "text") -> str:
    output = io.StringIO()
    parse_stream(nlp, io.BytesIO(text.encode()), output, input_format=input_format)
    return output.getvalue()


@Language.component("pairatt_test_first_token_heads")
def first_token_heads(doc: Doc) -> Doc:
    """Every token of a sentence hangs from its first token, whitespace or not: a parse fixed in advance."""
    heads, deps = [], []
    for sentence in doc.sents:
        heads += [sentence.start] * len(sentence)
        deps += ["ROOT"] + ["dep"] * (len(sentence) - 1)
    return Doc(doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc],
               heads=heads, deps=deps, user_data=doc.user_data)  # fmt: skip


@pytest.fixture(scope="module")
def fast_nlp():
    """spaCy's sentencizer (a whitespace token after a full stop starts a sentence), then fixed heads."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("pairatt_test_first_token_heads")
    return nlp


def assert_scores_against_gold(system: str, tmp_path, sentences_too: bool = True) -> None:
    """ud-eval compares the output with a gold file of the same text: tokens and words all aligned."""
    gold = gold_conllu([words for _, sentences in WHITESPACE_LINES for words in sentences])
    (tmp_path / "gold.conllu").write_text(gold, encoding="utf8")
    (tmp_path / "system.conllu").write_text(system, encoding="utf8")
    main(["ud-eval", str(tmp_path / "gold.conllu"), str(tmp_path / "system.conllu"), "--output", str(tmp_path / "s")])
    metrics = json.loads((tmp_path / "s").read_text(encoding="utf8"))["metrics"]
    assert metrics["Tokens"]["f1"] == metrics["Words"]["f1"] == 1.0
    if sentences_too:
        assert metrics["Sentences"]["f1"] == 1.0


def test_whitespace_is_no_word_and_the_output_scores_against_gold(fast_nlp, tmp_path):
    text = "".join(line + "\n" for line, _ in WHITESPACE_LINES)
    system = parsed(fast_nlp, text)
    rows = [line.split("\t") for line in system.splitlines() if line and not line.startswith("#")]
    assert all(row[1].strip() and "\u2423" not in row[1] for row in rows)
    texts = [line[len("# text = ") :] for line in system.splitlines() if line.startswith("# text = ")]
    assert texts == ["Leading blanks .", "Trailing ones .", "Repeated   spaces\u2409and \u2409 tabs .",
                     "No\u00a0\u00a0break marks .", "One here .", "Two there ."]  # fmt: skip
    # the whitespace in MISC, UDPipe's escapes
    misc = {row[1]: row[9] for row in rows}
    assert misc["Leading"] == "SpacesBefore=\\s\\s"
    assert misc["Repeated"] == "SpacesAfter=\\s\\s\\s" and misc["spaces"] == "SpacesAfter=\\t"
    assert misc["and"] == "SpacesAfter=\\s\\t\\s"
    assert misc["No"] == "SpacesBefore=\\u00a0|SpacesAfter=\\u00a0\\u00a0"
    assert misc["One"] == "SpacesBefore=\\t\\s" and misc["there"] == "_"
    assert [row[9] for row in rows if row[1] == "."] == ["SpaceAfter=No", "SpacesAfter=\\s\\s", "SpaceAfter=No",
                                                         "SpacesAfter=\\u00a0", "SpacesAfter=\\s\\s\\t\\s\\s",
                                                         "SpacesAfter=\\s\\s"]  # fmt: skip
    assert text_from_conllu(system) == text.replace("\n", "")
    assert_scores_against_gold(system, tmp_path)


def whitespace_doc(nlp, words, spaces, heads, sent_starts=None) -> Doc:
    deps = ["ROOT" if head == i else "dep" for i, head in enumerate(heads)]
    doc = Doc(nlp.vocab, words=words, spaces=spaces, heads=heads, deps=deps, sent_starts=sent_starts)
    doc.user_data[SOURCE_KEY] = {"id": "7", "comments": []}
    return doc


def word_rows(text: str):
    return [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]


def test_a_word_under_a_whitespace_token_takes_its_nearest_word_ancestor(fast_nlp):
    # "A" is the root; "b" hangs from the whitespace token, which hangs from "A"
    doc = whitespace_doc(fast_nlp, ["A", "  ", "b", "c"], [True, False, True, False], [0, 0, 1, 2])
    assert [(row[1], row[6], row[7]) for row in word_rows(conllu_blocks(doc))] == [
        ("A", "0", "root"), ("b", "1", "dep"), ("c", "2", "dep"),
    ]  # fmt: skip
    # the whitespace token is the root: the first word left without a word above it becomes the root
    doc = whitespace_doc(fast_nlp, ["A", "  ", "b", "c"], [True, False, True, False], [1, 1, 1, 2])
    assert [(row[1], row[6], row[7]) for row in word_rows(conllu_blocks(doc))] == [
        ("A", "0", "root"), ("b", "1", "dep"), ("c", "2", "dep"),
    ]  # fmt: skip


def test_a_sentence_of_whitespace_folds_into_its_neighbours(fast_nlp):
    words, spaces = ["A", ".", " \t", "B", ".", " "], [False, True, False, False, True, False]
    doc = whitespace_doc(fast_nlp, words, spaces, [0, 0, 2, 3, 3, 5], sent_starts=[1, 0, 1, 1, 0, 1])
    written = conllu_blocks(doc)
    assert [line for line in written.splitlines() if line.startswith("#")] == [
        "# sent_id = 7-1", "# text = A.", "# sent_id = 7-2", "# text = B.",
    ]  # fmt: skip
    assert [row[9] for row in word_rows(written)] == ["SpaceAfter=No", "SpacesAfter=\\s\\s\\t", "SpaceAfter=No",
                                                      "SpacesAfter=\\s\\s"]  # fmt: skip
    # a Doc of whitespace only has no words, so no sentence
    assert conllu_blocks(whitespace_doc(fast_nlp, [" ", "\t"], [False, False], [0, 1])) == ""


# UDPipe's MISC: SpacesBefore on the first token, SpacesAfter on words and on a multiword token
UDPIPE_BLOCK = """# sent_id = a
# text = Don't  stop|here.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\tSpacesBefore=\\t\\s|SpacesAfter=\\s\\s
1\tDo\t_\t_\t_\t_\t_\t_\t_\t_
2\tn't\t_\t_\t_\t_\t_\t_\t_\t_
3\tstop|here\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No
4\t.\t_\t_\t_\t_\t_\t_\t_\tSpacesAfter=\\u00a0\\n\\s

"""


def test_reading_conllu_honours_spaces_before_and_after(fast_nlp):
    (source,) = read_conllu_sources(numbered_lines(io.BytesIO(UDPIPE_BLOCK.encode())))
    doc = source.to_doc(fast_nlp)
    assert doc.text == "\t Don't  stop|here.\u00a0\n "
    assert [token.text for token in doc if not token.is_space] == ["Do", "n't", "stop|here", "."]
    written = conllu_blocks(doc)
    assert written == UDPIPE_BLOCK
    # parsed again, the words keep their whitespace
    assert text_from_conllu(parsed(fast_nlp, written, "conllu")) == doc.text


def test_spaces_before_or_after_that_are_not_whitespace_are_refused():
    block = "1\tword\t_\t_\t_\t_\t_\t_\t_\tSpacesAfter=\\sx\n\n"
    with pytest.raises(ParseCommandError, match=r"CoNLL-U line 1: SpacesAfter=\\sx is not whitespace"):
        list(read_conllu_sources(numbered_lines(io.BytesIO(block.encode()))))
