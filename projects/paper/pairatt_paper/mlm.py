"""Masked-language-model adaptation of the encoder on a corpus's raw text (the paper's fea:ptb:emb+att).

Meng et al. (2019) train BERT further as a masked language model on the PTB sentences before
extracting features from it. `adapt_encoder` does that for any Hugging Face encoder directory:
BERT's recipe (15% of the non-special wordpieces selected, of those 80% [MASK], 10% a random
wordpiece, 10% kept; transformers' DataCollatorForLanguageModeling), AdamW with linear warm-up
and decay, then the encoder without its MLM head is saved where a config's
`[components.transformer.model] name` can point.

An encoder saved without an MLM head (all-MiniLM-L6-v2 is a sentence-transformers BertModel)
gets a new head: its transform (dense + LayerNorm) and output bias start at random / zero, and its
decoder is tied to the word embeddings, so only the transform is new. `load_masked_lm` says so.
"""

import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import spacy
from spacy.tokens import Doc, DocBin

from spacy_pairatt.parse_files.reading import comment_parts, numbered_lines, read_conllu_sources, read_text
from spacy_pairatt.reporting.json_files import write_json

MLM_PROBABILITY = 0.15
SENTENCE_SUFFIXES = (".conllu", ".spacy", ".txt")
ADAPTATION_FILE = "mlm_adaptation.json"


def read_sentences(path: Path) -> List[str]:
    """The raw sentences of a training set, by suffix.

    .conllu: each sentence's `# text`, else its words joined as SpaceAfter says; .spacy: each
    Doc's sentences (each Doc's text when it has no sentence boundaries); .txt: each non-empty line.
    """
    suffix = path.suffix.lower()
    if suffix not in SENTENCE_SUFFIXES:
        raise ValueError(
            f"{path}: cannot read sentences from a {suffix or 'suffix-less'} file; use {SENTENCE_SUFFIXES}"
        )
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if suffix == ".spacy":
        docs = DocBin().from_disk(path).get_docs(spacy.blank("xx").vocab)
        return [text for doc in docs for text in sentence_texts(doc) if text]
    with path.open("rb") as stream:
        if suffix == ".txt":
            return [source.text.strip() for source in read_text(numbered_lines(stream))]
        return [
            conllu_sentence_text(source.comments, source.words, source.spaces)
            for source in read_conllu_sources(numbered_lines(stream))
        ]


def sentence_texts(doc: Doc) -> List[str]:
    """A Doc's sentences when it has sentence boundaries (or a parse), else its whole text."""
    if doc.has_annotation("SENT_START") or doc.has_annotation("DEP"):
        return [sent.text.strip() for sent in doc.sents]
    return [doc.text.strip()]


def conllu_sentence_text(comments: Sequence[str], words: Sequence[str], spaces: Sequence[bool]) -> str:
    """A CoNLL-U sentence's `# text`, or its words with the spaces of SpaceAfter when it has none."""
    text = next((value for key, value in map(comment_parts, comments) if key == "text"), None)
    if text is not None:
        return text
    return "".join(word + (" " if space else "") for word, space in zip(words, spaces)).strip()


def encode_sentences(tokenizer, sentences: Sequence[str], max_length: int) -> List[Dict[str, List[int]]]:
    """Wordpiece ids with [CLS]/[SEP], truncated to max_length, and which of them are special tokens."""
    encoded = tokenizer(list(sentences), truncation=True, max_length=max_length, return_special_tokens_mask=True)
    return [
        {"input_ids": ids, "special_tokens_mask": special}
        for ids, special in zip(encoded["input_ids"], encoded["special_tokens_mask"])
    ]


def masking_collator(tokenizer, seed: Optional[int] = None):
    """Pads a batch and masks it: 15% of the non-special, non-padding wordpieces are selected (labels
    are -100 elsewhere), of those 80% become [MASK], 10% a random wordpiece and 10% stay."""
    from transformers import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(
        tokenizer,
        mlm=True,
        mlm_probability=MLM_PROBABILITY,
        mask_replace_prob=0.8,
        random_replace_prob=0.1,
        seed=seed,
    )


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' loading warnings; the callers report what matters themselves."""
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)


def load_masked_lm(encoder: str):
    """The encoder with an MLM head, reporting which head weights are new and checking the decoder tie."""
    from transformers import AutoModelForMaskedLM

    with quiet_transformers():
        model, info = AutoModelForMaskedLM.from_pretrained(encoder, output_loading_info=True)
    decoder, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    if decoder.weight is not embeddings.weight:
        raise ValueError(f"{encoder}: the MLM decoder of {type(model).__name__} is not tied to the word embeddings")
    if info["missing_keys"]:
        print(f"{encoder} has no weights for {sorted(info['missing_keys'])}: initialised new (random / zero)")
    if info["unexpected_keys"]:
        print(f"{encoder}: not used while training as an MLM: {sorted(info['unexpected_keys'])}")
    print(f"{type(model).__name__}: the decoder is tied to the word embeddings")
    return model


def mlm_head(model):
    """The MLM head when it is the one module besides the encoder (BERT's `cls`, RoBERTa's `lm_head`)."""
    others = [module for name, module in model.named_children() if name != model.base_model_prefix]
    return others[0] if len(others) == 1 else None


def masked_lm_loss(model, batch):
    """Mean cross-entropy over the selected wordpieces, as `model(**batch).loss`, but with the head run
    on those wordpieces only where it is one module: its vocabulary-wide decoder is much of a small
    encoder's cost (1.5x faster for MiniLM on CPU), and 85% of its outputs would be thrown away."""
    import torch

    head = mlm_head(model)
    if head is None:
        return model(**batch).loss
    selected = batch["labels"] != -100
    hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return torch.nn.functional.cross_entropy(head(hidden.last_hidden_state[selected]), batch["labels"][selected])


def batches(n_items: int, batch_size: int, rng: random.Random) -> Iterator[List[int]]:
    """Indices of shuffled batches, epoch after epoch, forever (the last short batch of an epoch kept)."""
    order = list(range(n_items))
    while True:
        rng.shuffle(order)
        for start in range(0, n_items, batch_size):
            yield order[start : start + batch_size]


def decay_groups(model, weight_decay: float) -> List[Dict]:
    """AdamW parameter groups: no weight decay on biases and LayerNorm weights (BERT's recipe)."""
    decayed, not_decayed = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (not_decayed if parameter.ndim < 2 else decayed).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": not_decayed, "weight_decay": 0.0}]


def adapt_encoder(
    encoder: str,
    sentences: Sequence[str],
    output: Path,
    *,
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-5,
    max_length: int = 128,
    warmup_steps: Optional[int] = None,
    weight_decay: float = 0.01,
    seed: int = 0,
    device: Optional[str] = None,
    log_every: int = 10,
) -> Dict:
    """Train `encoder` as an MLM on `sentences` for `steps` batches and save it to `output`.

    warmup_steps: default 10% of steps. device: default cuda when available, else cpu.
    Returns (and saves as OUTPUT/mlm_adaptation.json) what was done and the running loss.
    """
    import torch
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    if not sentences:
        raise ValueError("mlm-adapt: no sentences to train on")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"mlm-adapt: steps ({steps}) and batch size ({batch_size}) must be positive")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    warmup_steps = steps // 10 if warmup_steps is None else warmup_steps
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(encoder)
    model = load_masked_lm(encoder).to(device)
    collate = masking_collator(tokenizer, seed)
    encoded = encode_sentences(tokenizer, sentences, max_length)
    optimizer = torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr)
    schedule = get_linear_schedule_with_warmup(optimizer, warmup_steps, steps)
    print(f"MLM adaptation of {encoder} on {len(encoded)} sentences: {steps} steps of {batch_size}, on {device}")

    model.train()
    losses: List[float] = []
    started = time.perf_counter()
    step = 0
    for indices in batches(len(encoded), batch_size, random.Random(seed)):
        batch = {name: tensor.to(device) for name, tensor in collate([encoded[i] for i in indices]).items()}
        if not (batch["labels"] != -100).any():
            continue  # no wordpiece selected (a batch of very short sentences): nothing to learn from
        step += 1
        loss = masked_lm_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % log_every == 0 or step == steps:
            window = losses[-log_every:]
            seconds = (time.perf_counter() - started) / step
            print(f"step {step}/{steps}: loss {sum(window) / len(window):.3f} ({seconds:.2f} s/step)")
        if step == steps:
            break
    summary = {
        "encoder": str(encoder),
        "sentences": len(encoded),
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "max_length": max_length,
        "warmup_steps": warmup_steps,
        "weight_decay": weight_decay,
        "seed": seed,
        "mlm_probability": MLM_PROBABILITY,
        "seconds_per_step": (time.perf_counter() - started) / steps,
        "losses": losses,
    }
    save_encoder(model, encoder, tokenizer, output)
    write_json(output / ADAPTATION_FILE, summary)
    return summary


def save_encoder(masked_lm, encoder: str, tokenizer, output: Path) -> None:
    """The adapted encoder without its MLM head, as AutoModel loads it: the trained weights over a
    fresh copy of the source encoder, so parts the MLM does not have (BERT's pooler) stay as they were."""
    from transformers import AutoModel

    with quiet_transformers():
        base = AutoModel.from_pretrained(encoder)
    missing, unexpected = base.load_state_dict(masked_lm.base_model.state_dict(), strict=False)
    if unexpected:
        raise ValueError(f"{encoder}: the MLM's encoder has weights {unexpected} that {type(base).__name__} lacks")
    output.mkdir(parents=True, exist_ok=True)
    base.save_pretrained(output)
    tokenizer.save_pretrained(output)
    kept = f"; kept from {encoder}: {sorted(missing)}" if missing else ""
    print(f"Saved the adapted {type(base).__name__} and its tokenizer to {output}{kept}")
