"""The UD English tokenizer (spacy_pairatt/components/tokenizer.py), multiword token lines in the CoNLL-U writer,
and tokenisation scored alone (`ud-tokenize`, `tokenizer-eval`): hand-worked examples and a slice of
EWT dev."""

import io
import json

import conllu
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training.converters import conllu_to_docs

from spacy_pairatt.cli import main
from spacy_pairatt.components.tokenizer import RULES, multiword_tokens, ud_english_tokenizer
from spacy_pairatt.corpora.ud_documents import document_texts
from spacy_pairatt.evaluation.tokenizer_eval import (
    STOCK,
    disagreement_kind,
    disagreements,
    evaluate_tokenizers,
    rule_pipeline,
    token_scores,
    tokenized_conllu,
    tokenizer_pipeline,
    without_multiword_lines,
)
from spacy_pairatt.evaluation.ud_treebank import read_treebank
from spacy_pairatt.parse_files.parsing import parse_stream
from tests.conftest import REPO, UD_DIR, write_first_sentences

CONFIG = str(REPO / "configs" / "pipeline_minilm.cfg")

# (rule, text, spaCy's English tokens, the tokens with the rule alone; tokens written with spaces),
# each worked out by hand
RULE_EXAMPLES = [
    ("punctuation_runs", "wow!!! ok?! <<x>> ____", "wow ! ! ! ok ? ! < < x > > _ _ _ _", "wow !!! ok ?! << x >> ____"),
    ("hyphenated_prefixes", "e-mail non-profit well-being", "e - mail non - profit well - being",
     "e-mail non-profit well - being"),
    ("hyphen_before_digits", "F-16 and mid-2004", "F-16 and mid-2004", "F - 16 and mid-2004"),
    ("leading_hyphen", "-for -5", "-for -5", "- for - 5"),
    ("phone_numbers", "713-853-3989 x3-9890 5-10", "713 - 853 - 3989 x3 - 9890 5 - 10", "713-853-3989 x3-9890 5 - 10"),
    ("letter_slash_letter", "b/c and/or", "b / c and/or", "b/c and/or"),
    ("times_and_thousands", "7:30PM 65k", "7:30PM 65k", "7:30 PM 65 k"),
    ("brackets_in_words", "account(s) pdf)(See", "account(s ) pdf)(See", "account ( s ) pdf ) ( See"),
    ("added_special_cases", "on Wed. at Ft. Worth", "on We d. at Ft . Worth", "on Wed. at Ft. Worth"),
    ("dropped_special_cases", "and/or (see):", "and/or ( see ):", "and / or ( see ) :"),
    ("numeral_plurals", "the 60's and Bush's", "the 60 's and Bush 's", "the 60's and Bush 's"),
    ("yall_clitics", "y'all'd've y’all’re y'all", "y'all'd've y’all’re y' all", "y' all 'd 've y’ all ’re y' all"),
    ("cased_special_cases", "DON'T GONNA Don't I'M", "DON'T GONNA Do n't I'M", "DO N'T GON NA Do n't I 'M"),
]  # fmt: skip

# A gold sentence with three multiword tokens (7 tokens, 10 words), in UD 2.16's way.
GOLD = """# newdoc id = example
# sent_id = 1
# text = I don't think it's gonna rain.
1	I	I	PRON	PRP	_	4	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	think	think	VERB	VBP	_	0	root	_	_
5-6	it's	_	_	_	_	_	_	_	_
5	it	it	PRON	PRP	_	9	nsubj	_	_
6	's	be	AUX	VBZ	_	9	aux	_	_
7-8	gonna	_	_	_	_	_	_	_	_
7	gon	go	VERB	VBG	_	9	aux	_	_
8	na	to	PART	TO	_	9	mark	_	_
9	rain	rain	VERB	VB	_	4	ccomp	_	SpaceAfter=No
10	.	.	PUNCT	.	_	4	punct	_	_

"""


def tokens(nlp, text):
    return [token.text for token in nlp.make_doc(text)]


@pytest.mark.parametrize("rule, text, stock, expected", RULE_EXAMPLES, ids=[example[0] for example in RULE_EXAMPLES])
def test_each_rule_changes_spacys_tokens_to_ewts(rule, text, stock, expected):
    assert tokens(spacy.blank("en"), text) == stock.split()
    assert tokens(rule_pipeline([rule]), text) == expected.split()


def test_every_rule_has_an_example_and_unknown_rules_are_refused():
    assert [example[0] for example in RULE_EXAMPLES] == list(RULES)
    with pytest.raises(ValueError, match="unknown tokenizer rules \\['no_such_rule'\\]"):
        ud_english_tokenizer(spacy.blank("en").vocab, ["no_such_rule"])


@pytest.mark.parametrize(
    "text, runs",
    [
        ("I don't think it's gonna rain.", [["do", "n't"], ["it", "'s"], ["gon", "na"]]),
        ("Bush's and the parents' house, I'm sure.", [["Bush", "'s"], ["parents", "'"], ["I", "'m"]]),
        ("He said 'the Christians' and dont", [["do", "nt"]]),  # a quote's closing apostrophe stays a token
        ("I do n't know", []),  # written apart: no multiword token
        ("the 60's", []),
    ],
)
def test_multiword_tokens_are_clitics_written_with_their_word(text, runs):
    doc = ud_english_tokenizer(spacy.blank("en").vocab)(text)
    assert [[doc[i].text for i in run] for run in multiword_tokens(doc[:])] == runs


def test_no_multiword_tokens_outside_english():
    words, spaces = ["I", "do", "n't", "know"], [True, False, True, False]
    assert multiword_tokens(Doc(spacy.blank("en").vocab, words=words, spaces=spaces)[:]) == [range(1, 3)]
    assert multiword_tokens(Doc(spacy.blank("de").vocab, words=words, spaces=spaces)[:]) == []


def test_multiword_lines_give_tokens_f1_100_on_a_gold_example_with_contractions():
    gold = read_treebank(GOLD.splitlines())
    texts = document_texts(GOLD.splitlines())
    system = tokenized_conllu(tokenizer_pipeline(CONFIG), texts)
    assert [line.split("\t")[:2] for line in system.splitlines() if line[:2] in ("2-", "5-", "7-")] == [
        ["2-3", "don't"], ["5-6", "it's"], ["7-8", "gonna"],
    ]  # fmt: skip
    scores = token_scores(gold, read_treebank(system.splitlines()))
    assert {metric: scores[metric]["f1"] for metric in ("Tokens", "Words")} == {"Tokens": 1.0, "Words": 1.0}
    # written as ten tokens, only I, think, rain and . are gold tokens: F1 = 2 * 4 / (7 + 10)
    scores = token_scores(gold, read_treebank(without_multiword_lines(system).splitlines()))
    assert scores["Tokens"]["f1"] == pytest.approx(8 / 17) and scores["Words"]["f1"] == 1.0
    # spaCy's converter and the conllu library read the words back
    assert [token.text for token in next(iter(conllu_to_docs(system, n_sents=1, no_print=True)))] == [
        "I", "do", "n't", "think", "it", "'s", "gon", "na", "rain", ".",
    ]  # fmt: skip
    assert len(conllu.parse(system)[0].filter(id=lambda token_id: isinstance(token_id, int))) == 10
    # and `parse --input-format conllu` reads it as its words and writes it again unchanged
    again = io.StringIO()
    parse_stream(tokenizer_pipeline(CONFIG), io.BytesIO(system.encode("utf8")), again, input_format="conllu")
    assert again.getvalue() == system


def test_disagreements_are_the_stretches_tokenized_differently():
    gold = read_treebank(GOLD.splitlines())
    words_as_tokens = without_multiword_lines(
        tokenized_conllu(tokenizer_pipeline(STOCK), document_texts(GOLD.splitlines()))
    )
    system = read_treebank(words_as_tokens.splitlines())
    assert disagreements(gold, system) == {("don't", "do n't"): 1, ("it's", "it 's"): 1, ("gonna", "gon na"): 1}


@pytest.mark.parametrize(
    "gold_tokens, kind",
    [
        ("! ! !", "punctuation only"),
        ("____", "punctuation only"),
        ("don't", "apostrophe (contraction, possessive, quote)"),
        ("e-mail", "hyphen or dash"),
        ("and / or", "slash"),
        ("account ( s", "brackets"),
        ("etc.", "word and period"),
        ("7:30 PM", "digits and letters"),
        ("http://x.org/a-b", "URL or e-mail address"),
        ("a lot", "other"),
    ],
)
def test_disagreement_kinds(gold_tokens, kind):
    assert disagreement_kind(gold_tokens) == kind


def test_the_config_names_the_registered_tokenizer_and_a_saved_pipeline_keeps_it(tmp_path):
    nlp = tokenizer_pipeline(CONFIG)
    assert nlp.config["nlp"]["tokenizer"] == {"@tokenizers": "spacy-pairatt.ud_english_tokenizer.v1"}
    text = "I can't!!! Call 713-853-3989 re: e-mail and/or F-16 (see account(s)):"
    expected = tokens(rule_pipeline(list(RULES)), text)
    assert tokens(nlp, text) == expected
    nlp.to_disk(tmp_path / "pipeline")
    assert tokens(spacy.load(tmp_path / "pipeline"), text) == expected


@pytest.fixture(scope="module")
def dev_slice(tmp_path_factory):
    source = UD_DIR / "en_ewt-ud-dev.conllu"
    if not source.exists():
        pytest.skip(f"UD English-EWT not found at {source}")
    return write_first_sentences(source, 200, tmp_path_factory.mktemp("dev") / "dev200.conllu")


def test_the_ud_english_tokenizer_beats_spacys_on_the_first_200_dev_sentences(dev_slice, tmp_path):
    text = tmp_path / "dev200.txt"
    main(["ud-text", str(dev_slice), "--output", str(text)])
    scores = {}
    for name, source in (("stock", STOCK), ("ud", CONFIG)):
        main(["ud-tokenize", source, str(text), "--output", str(tmp_path / f"{name}.conllu")])
        main(["ud-eval", str(dev_slice), str(tmp_path / f"{name}.conllu"), "--output", str(tmp_path / f"{name}.json")])
        scores[name] = json.loads((tmp_path / f"{name}.json").read_text())["metrics"]
    for metric in ("Tokens", "Words"):
        assert scores["ud"][metric]["f1"] > scores["stock"][metric]["f1"]


def test_tokenizer_eval_writes_results_with_provenance(tmp_path, capsys):
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOLD, encoding="utf8")
    output = tmp_path / "tokenizer.json"
    main(["tokenizer-eval", "--train", str(gold), "--dev", str(gold), "--config", CONFIG,
          "--output-json", str(output), "--output-md", str(tmp_path / "tokenizer.md")])  # fmt: skip
    result = json.loads(output.read_text(encoding="utf8"))
    assert "provenance" in result and result["gold"] == {"train": str(gold), "dev": str(gold)}
    assert [row["name"] for row in result["rows"]] == ["spaCy English, words as tokens", "spaCy English", "UD English"]
    assert result["rows"][2]["scores"]["dev"]["Tokens"]["f1"] == 1.0
    assert result["effects"]["multiword token lines"]["train"]["Tokens"] == pytest.approx(1 - 8 / 17)
    assert result["disagreements"]["spaCy English"]["train"]["total"] == 0
    assert "| UD English | dev | 100.00 | 100.00 | 100.00 |" in capsys.readouterr().out
    assert "| multiword token lines |" in (tmp_path / "tokenizer.md").read_text(encoding="utf8")


def test_evaluate_tokenizers_reads_test_once(tmp_path):
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOLD, encoding="utf8")
    result = evaluate_tokenizers({"train": str(gold), "dev": str(gold), "test": str(gold)}, CONFIG)
    assert all(list(row["scores"]) == ["train", "dev", "test"] for row in result["rows"])
    assert all(list(effect) == ["train", "dev"] for effect in result["effects"].values())


@pytest.mark.parametrize(
    "tokenizer, message",
    [("nothing", "'nothing' is neither blank:LANG nor a config file"), ("blank:zz", "Can't import language zz")],
)
def test_ud_tokenize_errors_are_one_line(tmp_path, tokenizer, message):
    source = tmp_path / "in.txt"
    source.write_text("Hello there.\n", encoding="utf8")
    with pytest.raises(SystemExit, match=f"ud-tokenize: error: .*{message}") as error:
        main(["ud-tokenize", tokenizer, str(source)])
    assert "\n" not in str(error.value.code)


def test_ud_tokenize_writes_to_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"I can't go!!\n")))
    main(["ud-tokenize", CONFIG, "-"])
    lines = [line.split("\t")[:2] for line in capsys.readouterr().out.splitlines() if not line.startswith("#") and line]
    assert lines == [["1", "I"], ["2-3", "can't"], ["2", "ca"], ["3", "n't"], ["4", "go"], ["5", "!!"]]


def test_upper_and_title_case_clitics_split_as_their_lower_case_forms():
    """`DON'T`, `GONNA` and `Y'all'd've` get the words and multiword tokens of `don't`,
    `gonna` and `y'all'd've`."""
    tokenizer = ud_english_tokenizer(spacy.blank("en").vocab)
    for text in ("DON'T", "GONNA", "Y'all'd've", "Y'ALL'D'VE", "WE'RE", "CAN'T"):
        cased, lower = tokenizer(text), tokenizer(text.lower())
        assert [token.text.lower() for token in cased] == [token.text for token in lower], text
        assert [token.norm_ for token in cased] == [token.norm_ for token in lower], text
        assert multiword_tokens(cased[:]) == multiword_tokens(lower[:]) != [], text
