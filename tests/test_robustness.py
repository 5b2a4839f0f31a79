"""Long, odd and malformed input: every parse is one tree per sentence, and bad gold data fails loudly.

Runs on a tiny random BERT trained for two epochs: the trees only need to be well-formed, not good.
"""

import json
import os
import random
import re
import resource
import subprocess
import sys
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.attrs import SENT_START
from spacy.tokens import Doc, DocBin
from spacy.training import Corpus, Example
from thinc.api import Adam, fix_random_seed

from spacy_pairatt.integration.scoring import sentence_is_one_tree
from spacy_pairatt.layers.pair_batch import MAX_UNSEGMENTED_TOKENS, doc_sentences
from tests.conftest import examples_from_docs, make_pipeline, make_transformer_pipeline

COMMON_WORDS = "the of and a to in is was he for it with as his on be at by I this had not are but from".split()
ODD_WORDS = [
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "中文", "日本語テキスト", "مرحبا", "שלום", "हिन्दी", "Ελληνικά", "a\u0301",
    "\x00", "\x07", "\x1b[0m", "\u200b", "\ufeff", "\u202e", "\r\n", " ", "\n\n", "\t", "...", "?!", "don't", "U.S.",
]  # fmt: skip
# Over 80 characters, with a valid two-sentence parse (roots 2 and 6) that the malformed cases below break.
LONG_WORDS = (
    "Malformed gold trees . They must stop the training run at once instead of silently teaching the parser ."
).split()
GOOD_HEADS = [2, 2, 2, 2, 6, 6, 6, 9, 9, 6, 11, 6, 15, 12, 15, 6, 17, 15, 6]


def good_deps(heads):
    """Labels every trained parser knows: roots are ROOT, every other word punct."""
    return ["ROOT" if head == i else "punct" for i, head in enumerate(heads)]


def with_heads(heads):
    """LONG_WORDS with GOOD_HEADS where `heads` is None, else with the given heads."""
    return [good if new is None else new for good, new in zip(GOOD_HEADS, heads)]


CYCLE = with_heads([1, 2, 0] + [None] * (len(LONG_WORDS) - 3))  # no root in the first sentence
CROSSING = with_heads([2, 3, 2, 3] + [None] * (len(LONG_WORDS) - 4))  # two interleaved trees


def sentence_units(doc):
    """(start, end) of the spans the parser must make one tree each: the Doc's sentences, whatever their
    length; else the Doc, or, over MAX_UNSEGMENTED_TOKENS, consecutive pieces no longer than that."""
    if len(doc) == 0:
        return []
    units = doc_sentences(doc)
    if doc.has_annotation("SENT_START"):
        assert units == [(sent.start, sent.end) for sent in doc.sents]
    elif len(doc) <= MAX_UNSEGMENTED_TOKENS:
        assert units == [(0, len(doc))]
    else:
        assert all(end - start <= MAX_UNSEGMENTED_TOKENS for start, end in units)
    assert units[0][0] == 0 and units[-1][1] == len(doc) and all(a[1] == b[0] for a, b in zip(units, units[1:]))
    return units


def assert_one_tree_per_sentence(doc, units, labels):
    """units: the sentences the Doc had before parsing (parsing resets them from the roots)."""
    heads = np.array([token.head.i for token in doc], dtype="int64")
    for start, end in units:
        inside = heads[start:end]
        assert ((inside >= start) & (inside < end)).all(), (start, end, inside)
        assert int((inside == np.arange(start, end)).sum()) == 1, (start, end, inside)
        assert sentence_is_one_tree(heads, start, end), (start, end, inside)
    assert {token.dep_ for token in doc} <= set(labels)


def parse_and_check(nlp, docs):
    """Parse Docs or texts and check one tree per sentence they had just before the parser ran."""
    parser = nlp.get_pipe("pairatt_parser")
    docs = list(nlp.pipe(docs, disable=[parser.name]))
    units = [sentence_units(doc) for doc in docs]
    parsed = list(parser.pipe(docs))
    for doc, doc_units in zip(parsed, units):
        assert_one_tree_per_sentence(doc, doc_units, parser.labels)
    return parsed


@contextmanager
def sentencizer_in_front(nlp):
    nlp.add_pipe("sentencizer", first=True)
    try:
        yield nlp
    finally:
        nlp.remove_pipe("sentencizer")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny model's operations are too small to gain from threads, and on a busy machine OpenMP's
    waiting threads make each call several times slower: this keeps 1,000 hypothesis examples fast."""
    import torch

    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n_threads)


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, ud_train_docs):
    fix_random_seed(0)
    random.seed(0)
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:20])
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-3)
    for _ in range(2):
        for batch in spacy.util.minibatch(examples, 10):
            nlp.update(batch, sgd=optimizer)
    return nlp


@pytest.fixture(scope="module")
def long_text():
    """About 10,000 tokens of common words in sentences of 3 to 30 words."""
    rng = random.Random(0)
    words = []
    while len(words) < 9_990:
        words += rng.choices(COMMON_WORDS, k=rng.randint(3, 30)) + ["."]
    return " ".join(words)


# --- long input ---------------------------------------------------------------------------------


def rare_words_text():
    """600 rare words of several wordpieces each, far more than the encoder's 512 positions."""
    rng = random.Random(0)
    return " ".join("".join(rng.choices("qxzjkvwy", k=rng.randint(4, 9))) for _ in range(600))


URL_SENTENCE = " ".join(["https://example.com/" + "a/" * 40] * 20) + " and then the real sentence ends here ."


@pytest.fixture(scope="module")
def default_windows(tiny_bert_dir):
    """The transformer alone with the shipped configs' windows (128 tokens, stride 96)."""
    nlp = make_transformer_pipeline(tiny_bert_dir, span_window=128, stride=96)
    nlp.initialize()
    return nlp


@pytest.mark.parametrize("text", [rare_words_text(), URL_SENTENCE], ids=["600-rare-words", "urls"])
def test_every_token_gets_encoder_input(default_windows, trained, text):
    """A window with more wordpieces than the encoder's positions is cut by wordpieces too, so no
    token is left without any (spacy-transformers would truncate the window and leave them empty)."""
    tokenizer = default_windows.get_pipe("transformer").model.tokenizer
    assert len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]) > 1_500
    doc = default_windows(text)
    lengths = doc._.trf_data.align.lengths
    without_input = [token.text for token, n in zip(doc, lengths) if n == 0 and not token.is_space]
    assert without_input == []
    (parsed,) = parse_and_check(trained, [text])
    assert len(parsed) == len(doc)


def test_window_wider_than_the_encoder_is_refused(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(tiny_bert_dir, span_window=1000)
    with pytest.raises(ValueError, match=r"get_spans.window = 1000 tokens cannot fit the encoder.*window <= 510"):
        nlp.initialize(lambda: examples_from_docs(nlp, ud_train_docs[:2]))


def test_ten_thousand_tokens_with_sentence_boundaries(trained, long_text):
    with sentencizer_in_front(trained):
        (doc,) = parse_and_check(trained, [long_text])
    assert len(doc) >= 10_000 and len(list(doc.sents)) > 300


def test_pairs_are_scored_within_sentences_only(trained, long_text):
    """What keeps a long segmented Doc linear: each chunk pads to its own longest sentence, never to the Doc."""
    with sentencizer_in_front(trained):
        doc = trained(long_text, disable=["pairatt_parser"])
    chunks = trained.get_pipe("pairatt_parser").model.predict([doc])
    listed = sorted(sentence for chunk in chunks for sentence in chunk.sentences)
    assert listed == [(0, sent.start, len(sent)) for sent in doc.sents]
    for chunk in chunks:
        longest = max(n_words for _, _, n_words in chunk.sentences)
        assert chunk.scores.shape[:3] == (len(chunk.sentences), longest + 1, longest + 1)
    n_pairs = sum(chunk.scores.shape[0] * chunk.scores.shape[1] ** 2 for chunk in chunks)
    assert n_pairs < len(doc) ** 2 / 100


@contextmanager
def address_space_limit(extra_bytes):
    """Make allocations beyond `extra_bytes` more than the current address space fail with MemoryError.

    Without it a quadratic allocation would not fail: the kernel would kill the whole test run.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        in_use = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (in_use + extra_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_ten_thousand_tokens_without_sentence_boundaries_fit_in_2_gb(trained, long_text):
    """Too long for one n x n problem: segmented by the rule-based sentencizer, with a warning naming the Doc."""
    with address_space_limit(2 * 2**30), pytest.warns(UserWarning, match=r"Doc of \d+ tokens without sentence"):
        (doc,) = parse_and_check(trained, [long_text])
    assert max(len(sent) for sent in doc.sents) <= 31  # the text's sentences: 3 to 30 words and "."


@pytest.mark.parametrize("boundaries", ["one sentence set", "none"])
def test_a_thousand_token_sentence_is_one_tree(trained, boundaries):
    """Sentences are never cut: 1,000 tokens (several encoder windows) make one tree, without a warning."""
    rng = random.Random(1)
    words = rng.choices(COMMON_WORDS, k=1_000)
    doc = Doc(trained.vocab, words=words)
    if boundaries != "none":
        doc[0].is_sent_start = True
        for token in doc[1:]:
            token.is_sent_start = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (parsed,) = parse_and_check(trained, [doc])
    assert len(list(parsed.sents)) == 1 and sum(token.head.i == token.i for token in parsed) == 1


# --- odd input ----------------------------------------------------------------------------------


def test_empty_whitespace_and_odd_characters(trained):
    vocab = trained.vocab
    parse_and_check(
        trained,
        [
            "",
            "   ",
            "\n\t \n",
            "😀 ok\u0007 Ελληνικά 中文 مرحبا שלום हिन्दी 👨‍👩‍👧 \x00\u200b\ufeff\u202e",
            " ".join(ODD_WORDS),
            Doc(vocab, words=["Hello", " ", "world", "\n\n", "\t"], spaces=[False] * 5),
            Doc(vocab, words=[" ", "\n", "\t "], spaces=[False] * 3),
            Doc(vocab, words=[" "], spaces=[False]),
            Doc(vocab, words=["x"]),
        ],
    )


def test_sentence_boundaries_on_the_doc_are_kept(trained):
    vocab = trained.vocab
    words = ["One", "two", ".", " ", "Three", "\x07", "😀", "four"]
    parsed = parse_and_check(
        trained,
        [
            Doc(vocab, words=words, sent_starts=[True, False, False, True, False, True, None, False]),
            Doc(vocab, words=words, spaces=[False] * len(words), sent_starts=[True] * len(words)),
            Doc(vocab, words=words, sent_starts=[False] * len(words)),
        ],
    )
    assert [len(list(doc.sents)) for doc in parsed] == [3, len(words), 1]


@pytest.mark.parametrize(
    "heads", [GOOD_HEADS, CYCLE, CROSSING, list(range(len(LONG_WORDS)))], ids=["tree", "cycle", "crossing", "all-roots"]
)
def test_heads_already_on_the_doc_are_overwritten_with_trees(trained, heads):
    doc = Doc(trained.vocab, words=LONG_WORDS, heads=heads, deps=["not_a_label"] * len(heads))
    parse_and_check(trained, [doc])


# Any character but lone surrogates, which cannot be encoded as UTF-8 (no tokenizer or DocBin takes them).
ANY_CHARACTER = st.characters(exclude_categories=("Cs",))
WORD = st.one_of(st.text(ANY_CHARACTER, min_size=1, max_size=8), st.sampled_from(ODD_WORDS + COMMON_WORDS))


@st.composite
def doc_specs(draw):
    """(words, spaces, sent_starts or None): random tokens, whitespace and (partial) sentence starts."""
    words = draw(st.lists(WORD, max_size=40))
    n = len(words)
    spaces = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    sent_starts = draw(st.none() | st.lists(st.sampled_from([True, False, None]), min_size=n, max_size=n))
    return words, spaces, sent_starts


@settings(
    max_examples=int(os.environ.get("PAIRATT_HYPOTHESIS_EXAMPLES", 1000)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(st.one_of(st.text(ANY_CHARACTER, max_size=100), doc_specs()), min_size=1, max_size=4))
def test_random_text_and_tokenizations_give_one_tree_per_sentence(trained, batch):
    docs = [
        item if isinstance(item, str) else Doc(trained.vocab, words=item[0], spaces=item[1], sent_starts=item[2])
        for item in batch
    ]
    parse_and_check(trained, docs)


# --- malformed training data --------------------------------------------------------------------


def several_roots_in_one_sentence(vocab):
    """The valid parse with its second sentence start removed: only reachable in memory, since spaCy
    recomputes sentence starts from the roots when it builds a Doc from heads or reads a DocBin."""
    doc = Doc(vocab, words=LONG_WORDS, heads=GOOD_HEADS, deps=good_deps(GOOD_HEADS))
    starts = np.where(np.arange(len(doc)) == 0, 1, -1).astype("uint64")
    return doc.from_array([SENT_START], starts)


def reference_doc(vocab, case):
    if case == "several roots":
        return several_roots_in_one_sentence(vocab)
    heads = {"cycle": CYCLE, "head outside": CROSSING, "unknown label": GOOD_HEADS}[case]
    deps = good_deps(heads)
    if case == "unknown label":
        deps[5] = "not_a_label"
    return Doc(vocab, words=LONG_WORDS, heads=heads, deps=deps)


MALFORMED = {
    "cycle": r"tokens \[0, 1, 2\] form a cycle",
    "head outside": r"the head of token 0 \('Malformed'\) is token 2, outside its sentence",
    "several roots": r"tokens \[2, 6\] are all roots of the same sentence",
    "unknown label": r"label 'not_a_label' on token 5 \('must'\) is not one of the model's",
}


def error_pattern(case, where):
    text = " ".join(LONG_WORDS) + " "
    return re.escape(f"example {where} ({text[:80]!r})") + ".*" + MALFORMED[case]


@pytest.fixture(scope="module")
def untrained(tiny_bert_dir):
    return make_pipeline(tiny_bert_dir)


@pytest.fixture(scope="module")
def good_examples(untrained, ud_train_docs):
    return examples_from_docs(untrained, ud_train_docs[:6])


def initialize_with_labels(nlp, get_examples, labels):
    """nlp.initialize with labels given as in a training config's [initialize.components] block."""
    init_config = nlp.config["initialize"]["components"]
    init_config["pairatt_parser"] = {"labels": labels}
    try:
        nlp.initialize(get_examples)
    finally:
        del init_config["pairatt_parser"]


@pytest.mark.parametrize("case", list(MALFORMED))
def test_initialize_names_the_malformed_example(untrained, good_examples, case):
    bad = examples_from_docs(untrained, [reference_doc(untrained.vocab, case)])
    examples = good_examples[:3] + bad + good_examples[3:]
    labels = sorted({token.dep_ for example in good_examples for token in example.reference})
    with pytest.raises(ValueError, match=error_pattern(case, "3 of the training data")):
        initialize_with_labels(untrained, lambda: examples, {"labels": labels, "root_labels": ["ROOT"]})


@pytest.mark.parametrize("case", ["cycle", "head outside"])
def test_initialize_names_the_malformed_example_read_from_a_docbin(untrained, good_examples, tmp_path, case):
    docs = [example.reference for example in good_examples]
    docs.insert(2, reference_doc(untrained.vocab, case))
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    corpus = Corpus(tmp_path / "train.spacy")
    with pytest.raises(ValueError, match=error_pattern(case, "2 of the training data")):
        untrained.initialize(lambda: corpus(untrained))


@pytest.mark.parametrize("case", list(MALFORMED))
def test_update_names_the_malformed_example(trained, case):
    good = Doc(trained.vocab, words=LONG_WORDS, heads=GOOD_HEADS, deps=good_deps(GOOD_HEADS))
    bad = examples_from_docs(trained, [reference_doc(trained.vocab, case)])
    with pytest.raises(ValueError, match=error_pattern(case, "1 of the batch")):
        trained.update(examples_from_docs(trained, [good]) + bad, sgd=Adam(0.0))


def test_partial_annotation_and_empty_docs_are_fine(tiny_bert_dir, good_examples):
    nlp = make_pipeline(tiny_bert_dir)
    heads = [None if i in (5, 6, 15) else head for i, head in enumerate(GOOD_HEADS)]
    deps = [None if head is None else dep for head, dep in zip(heads, good_deps(GOOD_HEADS))]
    partial = Doc(nlp.vocab, words=LONG_WORDS, heads=heads, deps=deps)
    empty = Doc(nlp.vocab, words=[])
    examples = good_examples[:2] + [Example(Doc(nlp.vocab, words=LONG_WORDS), partial), Example(empty, empty)]
    nlp.initialize(lambda: examples)
    assert nlp.update(examples, sgd=Adam(1e-3))["pairatt_parser"] > 0


# --- same input, same parse ----------------------------------------------------------------------


def test_the_same_text_gets_the_same_parse(trained):
    """Within a batch and across calls: inference must not depend on dropout or on the batch's other Docs."""
    texts = ["The quick brown fox jumps over the lazy dog.", "Short one", " ".join(ODD_WORDS)] * 2
    first, second = ([[(t.head.i, t.dep_) for t in doc] for doc in trained.pipe(texts)] for _ in range(2))
    assert first == second
    assert first[:3] == first[3:]


# --- several processes --------------------------------------------------------------------------

TWO_PROCESSES = """
import json, multiprocessing, signal, sys
import spacy, torch

nlp = spacy.load(sys.argv[1])
texts = json.loads(sys.argv[2])

def parse(n_process):
    return [[(t.head.i, t.dep_) for t in doc] for doc in nlp.pipe(texts, n_process=n_process, batch_size=2)]

def give_up(*_):
    for child in multiprocessing.active_children():  # else nlp.pipe waits for them forever
        child.terminate()
    raise TimeoutError

one = parse(1)
signal.signal(signal.SIGALRM, give_up)
signal.alarm(int(sys.argv[3]))
try:
    two = parse(2)
    hangs = False
except TimeoutError:
    two, hangs = None, True
signal.alarm(0)
print(json.dumps({"threads": torch.get_num_threads(), "hangs": hangs, "same": two == one}))
"""


@pytest.fixture(scope="module")
def two_processes(trained, tmp_path_factory):
    """Parses with n_process=1 and 2 in a fresh interpreter (torch's thread pool started by the first)."""
    path = tmp_path_factory.mktemp("saved") / "model"
    trained.to_disk(path)
    texts = ["The quick brown fox jumps over the lazy dog.", "", "   ", " ".join(ODD_WORDS), "Short one"] * 2
    result = subprocess.run(
        [sys.executable, "-c", TWO_PROCESSES, str(path), json.dumps(texts), "60"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_processes_give_the_same_parses(two_processes):
    assert two_processes["same"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is the start method on Linux only")
def test_two_processes_do_not_hang(two_processes):
    """Forked workers inherit torch's OpenMP pool; spacy_pairatt.components.forking sets them to one thread."""
    if two_processes["threads"] == 1:
        pytest.skip("torch runs one thread here: no OpenMP pool to deadlock")
    assert not two_processes["hangs"]
