"""The pairatt_parser component end to end on a tiny random BERT and real UD EWT sentences."""

import random
import subprocess
import sys

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import Adam, fix_random_seed
from torch import nn

from spacy_pairatt.core.objectives import arc_log_scores
from spacy_pairatt.integration.scoring import sentence_is_one_tree
from spacy_pairatt.integration.validation import MissingAttentionError
from spacy_pairatt.layers.fused_attention import FusedBertSelfAttention
from spacy_pairatt.layers.pair_scorer import torch_module
from tests.conftest import REPO, examples_from_docs, make_pipeline

TEXTS = [
    "The quick brown fox jumps over the lazy dog. It didn't even look back!",
    "I   saw   her   yesterday .",
    "Short one",
]


def train(nlp, examples, n_iter, batch_size=10, learn_rate=1e-3):
    """A few epochs of plain updates; returns the parser loss per epoch."""
    optimizer = Adam(learn_rate)
    losses_per_epoch = []
    for _ in range(n_iter):
        random.shuffle(examples)
        losses = {}
        for batch in spacy.util.minibatch(examples, batch_size):
            nlp.update(batch, sgd=optimizer, losses=losses)
        losses_per_epoch.append(losses["pairatt_parser"])
    return losses_per_epoch


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, ud_train_docs):
    fix_random_seed(0)
    random.seed(0)
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:50])
    nlp.initialize(lambda: examples)
    losses = train(nlp, examples, n_iter=20)
    return nlp, examples, losses


def test_overfits_fifty_ud_sentences(trained):
    nlp, examples, losses = trained
    assert losses[-1] < 0.2 * losses[0]
    scores = nlp.evaluate(examples)
    assert scores["dep_uas"] >= 0.9
    assert scores["dep_las"] >= 0.8
    assert scores["dep_single_tree"] == 1.0
    assert set(scores) >= {"dep_uas_punct", "dep_las_punct", "dep_las_per_type", "sents_f"}


def assert_trees_per_sentence(doc):
    heads = np.array([t.head.i for t in doc])
    for sent in doc.sents:
        assert sentence_is_one_tree(heads, sent.start, sent.end)
        assert sum(t.head.i == t.i for t in sent) == 1


def test_sentence_boundaries_on_the_doc_are_kept(trained):
    nlp, _, _ = trained
    nlp.add_pipe("sentencizer", first=True)
    try:
        doc = nlp(TEXTS[0])
    finally:
        nlp.remove_pipe("sentencizer")
    assert [s.text for s in doc.sents] == ["The quick brown fox jumps over the lazy dog.", "It didn't even look back!"]
    assert_trees_per_sentence(doc)


def test_doc_without_boundaries_is_one_tree(trained):
    nlp, _, _ = trained
    for doc in nlp.pipe(TEXTS + ["", "   ", "😀 ok\u0007 Ελληνικά 中文"]):
        if len(doc):
            heads = np.array([t.head.i for t in doc])
            assert sentence_is_one_tree(heads, 0, len(doc))
            assert all(t.dep_ in nlp.get_pipe("pairatt_parser").labels for t in doc)


def test_serialization_round_trip(trained, tmp_path):
    nlp, _, _ = trained
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    parser, loaded_parser = nlp.get_pipe("pairatt_parser"), loaded.get_pipe("pairatt_parser")
    assert loaded_parser.labels == parser.labels
    assert loaded_parser.cfg == parser.cfg
    assert loaded.config["components"]["pairatt_parser"] == nlp.config["components"]["pairatt_parser"]
    # transformers does not save attn_implementation; loading must not fall back to its "sdpa" default
    encoder = loaded.get_pipe("transformer").model.transformer
    assert encoder.config._attn_implementation == "eager"
    assert not any("Sdpa" in type(module).__name__ for module in encoder.modules())
    for pipeline in (nlp, loaded):  # the fused eager attention once initialised and once loaded
        layers = pipeline.get_pipe("transformer").model.transformer.encoder.layer
        assert all(isinstance(layer.attention.self, FusedBertSelfAttention) for layer in layers)
    for doc, doc2 in zip(nlp.pipe(TEXTS), loaded.pipe(TEXTS)):
        assert [(t.head.i, t.dep_) for t in doc] == [(t.head.i, t.dep_) for t in doc2]
    from_bytes = make_pipeline(nlp.get_pipe("transformer").model.attrs["name"]).from_bytes(nlp.to_bytes())
    assert [(t.head.i, t.dep_) for t in from_bytes(TEXTS[1])] == [(t.head.i, t.dep_) for t in nlp(TEXTS[1])]


def test_greedy_decoder_gives_each_word_its_best_head(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(
        tiny_bert_dir,
        {"decoder": "greedy", "model": {"pair_scorer": {"@architectures": "spacy-pairatt.PaperPairScorer.v1"}}},
    )
    examples = examples_from_docs(nlp, ud_train_docs[:10])
    nlp.initialize(lambda: examples)
    parser = nlp.get_pipe("pairatt_parser")
    docs = [nlp.make_doc(text) for text in TEXTS]
    docs = list(nlp.get_pipe("transformer").pipe(docs))
    chunks = parser.predict(docs)
    sentences = [sentence for chunk in chunks for sentence in chunk.sentences]
    heads = [row[: n_words + 1] for chunk in chunks for row, (_, _, n_words) in zip(chunk.heads, chunk.sentences)]
    assert len(sentences) == len(TEXTS)
    best = {}
    for parse in parser.model.predict(docs):
        arcs = arc_log_scores(parse.scores, parse.mask, "paper")
        for b, (doc_index, start, n_words) in enumerate(parse.sentences):
            units = arcs[b, 1 : n_words + 1, : n_words + 1].copy()
            space = np.array([False] + [t.is_space for t in docs[doc_index][start : start + n_words]])
            units[:, space] = -np.inf  # whitespace tokens head no word (and hang from the word before them)
            word_units = [u for u in range(1, n_words + 1) if not space[u]]
            beside = [
                max([u for u in word_units if u < unit] or [min(u for u in word_units if u > unit)])
                for unit in range(1, n_words + 1)
            ]
            best[(doc_index, start, n_words)] = np.where(space[1:], beside, units.argmax(axis=1))
    for sentence, sentence_heads in zip(sentences, heads):
        assert sentence_heads[1:].tolist() == best[sentence].tolist()
    with pytest.raises(ValueError, match="decoder"):
        make_pipeline(tiny_bert_dir, {"decoder": "eisner"})


def test_missing_attention_fails_at_initialize_naming_the_keys(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(tiny_bert_dir)
    nlp.get_pipe("transformer").model.layers[0].shims[0]._hfmodel._init_transformer_config.clear()
    examples = examples_from_docs(nlp, ud_train_docs[:5])
    with pytest.raises(MissingAttentionError, match="output_attentions") as error:
        nlp.initialize(lambda: examples)
    assert 'attn_implementation = "eager"' in str(error.value)


def test_embeddings_only_needs_no_attention(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(tiny_bert_dir, {"model": {"pair_scorer": {"use_attention": False}}})
    nlp.get_pipe("transformer").model.layers[0].shims[0]._hfmodel._init_transformer_config.clear()
    examples = examples_from_docs(nlp, ud_train_docs[:5])
    nlp.initialize(lambda: examples)
    assert_trees_per_sentence(nlp("A test sentence ."))


def test_no_upstream_transformer_is_a_clear_error(ud_train_docs):
    nlp = spacy.blank("en")
    nlp.add_pipe("pairatt_parser")
    examples = examples_from_docs(nlp, ud_train_docs[:5])
    with pytest.raises(ValueError, match="no spacy-transformers 'transformer' component"):
        nlp.initialize(lambda: examples)


def test_entry_points_work_without_importing_the_package():
    code = (
        "import spacy, sys\n"
        "nlp = spacy.blank('en')\n"
        "parser = nlp.add_pipe('pairatt_parser')\n"
        "assert 'spacy_pairatt' in sys.modules\n"
        "for registry, name in [('architectures', 'spacy-pairatt.BiaffinePairScorer.v1'),\n"
        "    ('architectures', 'spacy-pairatt.PairAttParserModel.v1'), ('scorers', 'spacy-pairatt.parser_scorer.v1'),\n"
        "    ('architectures', 'spacy-pairatt.PairAttParser.v1'), ('architectures', 'spacy-pairatt.PairScorer.v1'),\n"
        "    ('misc', 'spacy-pairatt.minilm_path.v1')]:\n"
        "    getattr(spacy.registry, registry).get(name)\n"
        "print(type(parser).__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "PairAttParser"


def test_only_training_configs_bound_the_heap(trained, tmp_path):
    """Loading and parsing leave glibc's malloc thresholds alone; the training configs' before_init
    fixes them, after which every array over 128 KB is a fresh mmap whose pages fault in each time
    (counted in a fresh process, in minor page faults). Without the bound, whether a freed array's
    pages go back to the system depends on the heap's state, so parsing's own faults are not counted."""
    nlp, _, _ = trained
    nlp.to_disk(tmp_path / "pipeline")
    code = f"""
import resource, spacy, numpy as np
from spacy_pairatt.integration import memory
def faults_of_big_arrays():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        np.ones(2**17)  # 1 MB (under numpy's 4 MB for huge pages), freed at once
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
nlp = spacy.load({str(tmp_path / "pipeline")!r})
list(nlp.pipe(["The dog barked at the cat.", "It ran away."]))
assert not memory._training_thresholds_set
config = spacy.util.load_config({str(REPO / "configs" / "parser_minilm.cfg")!r})
bound = spacy.registry.resolve({{"bound": config["initialize"]["before_init"]}})["bound"]
assert bound(nlp) is nlp and memory._training_thresholds_set
print(faults_of_big_arrays())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(result.stdout) > 20 * 128  # a 1 MB array is 256 pages


def test_every_config_with_a_pairatt_component_bounds_the_heap_in_training():
    for path in sorted((REPO / "configs").glob("*.cfg")):
        config = spacy.util.load_config(path)
        # A sourced component (stage 2's frozen parser) has no factory here: the component it copies names it.
        factories = {
            component.get("factory") or component.get("component", name)
            for name, component in config["components"].items()
        }
        if factories & {"pairatt_parser", "pairatt_rel"}:
            before_init = config["initialize"]["before_init"]
            assert before_init == {"@callbacks": "spacy-pairatt.training_heap_bound.v1"}, path.name


def test_unknown_gold_label_names_the_example(trained):
    nlp, examples, _ = trained
    example = examples[0]
    token = example.reference[0]
    original = token.dep_
    token.dep_ = "not_a_label"
    try:
        with pytest.raises(ValueError, match="not_a_label"):
            nlp.update([example])
    finally:
        token.dep_ = original


def test_evaluate_command_scores_a_saved_pipeline(trained, tmp_path):
    """The project's evaluate step on real UD sentences grouped three per Doc."""
    import json

    from spacy.tokens import DocBin

    from spacy_pairatt.cli import main
    from tests.conftest import UD_DIR, read_conllu_sentences

    nlp, _, _ = trained
    nlp.to_disk(tmp_path / "model")
    docs = read_conllu_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 30)
    grouped = [Doc.from_docs(docs[i : i + 3]) for i in range(0, 30, 3)]
    DocBin(docs=grouped).to_disk(tmp_path / "dev.spacy")
    results = {}
    for source in ("gold", "pipeline"):
        output = tmp_path / f"{source}.json"
        main(
            [
                "evaluate",
                str(tmp_path / "model"),
                str(tmp_path / "dev.spacy"),
                "--sentences",
                source,
                "--output",
                str(output),
            ]
        )
        results[source] = json.loads(output.read_text())
    assert results["gold"]["n_docs"] == 10
    assert results["gold"]["n_words"] == sum(len(nlp.make_doc(d.text)) for d in grouped)
    assert results["gold"]["scores"]["sents_f"] == 1.0
    assert results["gold"]["scores"]["dep_single_tree"] == 1.0
    # with no segmenter each 3-sentence Doc is parsed as one tree: no gold sentence is a tree on its own
    assert results["pipeline"]["scores"]["dep_single_tree"] < 0.5
    main(["table", f"tiny:dev:{tmp_path / 'gold.json'}", "--output", str(tmp_path / "table.md")])
    assert "| tiny | dev |" in (tmp_path / "table.md").read_text()


def test_empty_docs_in_training_and_prediction(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:5])
    nlp.initialize(lambda: examples)
    empty = examples_from_docs(nlp, [Doc(nlp.vocab, words=[])])
    losses = nlp.update(empty + examples[:2], sgd=Adam(1e-3))
    assert losses["pairatt_parser"] > 0
    nlp.update(empty, sgd=Adam(1e-3))
    docs = list(nlp.pipe(["", "Two words", ""]))
    assert [len(doc) for doc in docs] == [0, 2, 0]
    assert sum(t.head.i == t.i for t in docs[1]) == 1


def test_assembled_pipeline_parses_raw_multi_sentence_text(trained, tmp_path):
    import json

    from spacy_pairatt.packaging.shipped_pipeline import assemble_pipeline, parse_examples

    nlp, _, _ = trained
    nlp.to_disk(tmp_path / "model")
    accuracy = tmp_path / "scores.json"
    accuracy.write_text(json.dumps({"scores": {"dep_las": 0.5, "dep_las_per_type": {}}}))
    assemble_pipeline(str(tmp_path / "model"), str(tmp_path / "shipped"), str(accuracy))
    shipped = spacy.load(tmp_path / "shipped")
    assert shipped.pipe_names == ["sentencizer", "transformer", "pairatt_parser", "pairatt_release_attention"]
    assert shipped.meta["license"] == "CC BY-SA 4.0" and shipped.meta["performance"] == {"dep_las": 0.5}
    doc = shipped(TEXTS[0])
    assert len(list(doc.sents)) == 2
    assert_trees_per_sentence(doc)
    assert "attentions" not in doc._.trf_data.model_output
    parse_examples(str(tmp_path / "shipped"), str(tmp_path / "demo.html"), [TEXTS[0]])
    assert "<svg" in (tmp_path / "demo.html").read_text()


def parser_training_loss(nlp, examples):
    """pairatt_parser's training loss and per-chunk gradients on `examples`, without dropout."""
    parser = nlp.get_pipe("pairatt_parser")
    model = parser.model
    docs = list(nlp.get_pipe("transformer").pipe([eg.predicted for eg in examples]))
    dropouts = [m for m in torch_module(model.get_ref("pair_scorer")).modules() if isinstance(m, nn.Dropout)]
    rates = [m.p for m in dropouts]
    listener = model.get_ref("tok2vec")
    try:
        for module in dropouts:
            module.p = 0.0  # training-time scores, without the randomness of dropout
        # What the transformer's update hands its listeners, from the Docs' inference outputs.
        listener.receive(listener.get_batch_id(docs), [doc._.trf_data for doc in docs], None)
        return parser.get_loss(examples, model.begin_update(docs)[0])
    finally:
        for module, rate in zip(dropouts, rates):
            module.p = rate


def test_small_chunks_give_the_same_parses_and_loss(trained):
    """Scoring sentences in length chunks bounds memory and changes nothing else."""
    nlp, examples, _ = trained
    model = nlp.get_pipe("pairatt_parser").model
    texts = [eg.reference.text for eg in examples[:12]]
    default = [[(t.head.i, t.dep_) for t in doc] for doc in nlp.pipe(texts)]
    loss_default = parser_training_loss(nlp, examples[:12])[0]
    model.attrs["max_pairs_per_chunk"] = 1
    try:
        assert len(model.predict([eg.predicted for eg in examples[:12]])) == 12
        assert [[(t.head.i, t.dep_) for t in doc] for doc in nlp.pipe(texts)] == default
        assert parser_training_loss(nlp, examples[:12])[0] == pytest.approx(loss_default, rel=1e-5)
    finally:
        model.attrs["max_pairs_per_chunk"] = 200_000


def test_summed_loss_is_the_mean_times_the_gold_words(trained):
    """loss_reduction "sum" (the UD pipeline's, as spaCy's taggers sum) scales loss and gradients by
    the batch's gold words and changes nothing else; an unknown reduction is refused by name."""
    nlp, examples, _ = trained
    parser = nlp.get_pipe("pairatt_parser")
    n_words = sum(len(eg.reference) for eg in examples[:6])
    mean_loss, mean_gradients = parser_training_loss(nlp, examples[:6])
    parser.loss_reduction = "sum"
    try:
        sum_loss, sum_gradients = parser_training_loss(nlp, examples[:6])
    finally:
        parser.loss_reduction = "mean"
    assert sum_loss == pytest.approx(mean_loss * n_words, rel=1e-5)
    for mean_chunk, sum_chunk in zip(mean_gradients, sum_gradients, strict=True):
        for mean_part, sum_part in zip(mean_chunk, sum_chunk, strict=True):  # d arcs, d labels on the gold arcs
            np.testing.assert_allclose(sum_part, mean_part * n_words, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="loss_reduction must be one of .*'sum'.*got 'total'"):
        type(parser)(nlp.vocab, parser.model, loss_reduction="total")


def test_loss_of_inference_scores_is_refused(trained):
    """Inference scores have no gradient (and labels only on decoded arcs): get_loss says so by name."""
    nlp, examples, _ = trained
    docs = list(nlp.get_pipe("transformer").pipe([eg.predicted for eg in examples[:2]]))
    parser = nlp.get_pipe("pairatt_parser")
    with pytest.raises(ValueError, match="begin_update"):
        parser.get_loss(examples[:2], parser.model.predict(docs))
