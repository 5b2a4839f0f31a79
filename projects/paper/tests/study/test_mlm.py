"""MLM adaptation: reading raw sentences, BERT's masking recipe, and an adapted encoder spaCy can load."""

import json
import random

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin
from transformers import AutoModel, AutoTokenizer

from pairatt_paper.cli import main
from pairatt_paper.mlm import (
    ADAPTATION_FILE,
    encode_sentences,
    load_masked_lm,
    masked_lm_loss,
    masking_collator,
    mlm_head,
    read_sentences,
)
from tests.conftest import make_transformer_pipeline

CONLLU = """# sent_id = 1
# text = Don't stop.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\t_\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_
3\tstop\tstop\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = 2
1-2\tCan't\t_\t_\t_\t_\t_\t_\t_\t_
1\tCa\tcan\tAUX\t_\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
4\t!\t!\tPUNCT\t_\t_\t3\tpunct\t_\t_

"""
WORDS = "the a dog cat parser attention head tree word sentence reads writes quickly slowly green".split()


def random_sentences(n: int, seed: int = 0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 20))) for _ in range(n)]


def test_read_sentences_by_suffix(tmp_path):
    conllu = tmp_path / "train.conllu"
    conllu.write_text(CONLLU, encoding="utf8")
    assert read_sentences(conllu) == ["Don't stop.", "Can't go!"]  # `# text`, else words and SpaceAfter

    text = tmp_path / "train.txt"
    text.write_text("First sentence.\n\n  Second one. \n", encoding="utf8")
    assert read_sentences(text) == ["First sentence.", "Second one."]

    nlp = spacy.blank("en")
    two_sentences = Doc(nlp.vocab, words=["One", ".", "Two", "."], sent_starts=[True, False, True, False])
    docbin = tmp_path / "train.spacy"
    DocBin(docs=[nlp("A doc. Not split."), two_sentences]).to_disk(docbin)
    assert read_sentences(docbin) == ["A doc. Not split.", "One .", "Two ."]  # Doc.sents where they are set

    with pytest.raises(ValueError, match=r"cannot read sentences from a \.json file"):
        read_sentences(tmp_path / "train.json")
    with pytest.raises(ValueError, match="no such file"):
        read_sentences(tmp_path / "missing.txt")


def test_masking_selects_15_percent_of_real_wordpieces_then_80_10_10(tiny_bert_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    encoded = encode_sentences(tokenizer, random_sentences(3000), max_length=16)
    width = max(len(item["input_ids"]) for item in encoded)  # the collator pads to the longest
    padding = [width - len(item["input_ids"]) for item in encoded]
    original = np.array([item["input_ids"] + [tokenizer.pad_token_id] * n for item, n in zip(encoded, padding)])
    is_special = np.array([item["special_tokens_mask"] + [1] * n for item, n in zip(encoded, padding)], dtype=bool)
    batch = masking_collator(tokenizer, seed=1)(encoded)
    inputs, labels = batch["input_ids"].numpy(), batch["labels"].numpy()
    assert inputs.shape == original.shape == (3000, 16)
    assert (original == tokenizer.pad_token_id).any()

    selected = labels != -100
    assert not (selected & is_special).any()  # [CLS], [SEP] and padding are never selected
    assert (inputs[is_special] == original[is_special]).all()
    assert (inputs[~selected] == original[~selected]).all()
    assert (labels[selected] == original[selected]).all()
    assert selected.sum() / (~is_special).sum() == pytest.approx(0.15, abs=0.01)

    masked = inputs[selected] == tokenizer.mask_token_id
    kept = inputs[selected] == original[selected]
    replaced = ~masked & ~kept
    assert masked.mean() == pytest.approx(0.8, abs=0.02)
    assert kept.mean() == pytest.approx(0.1, abs=0.02)
    assert replaced.mean() == pytest.approx(0.1, abs=0.02)


def test_a_head_is_added_to_an_encoder_without_one_and_tied(tiny_bert_dir, capsys):
    model = load_masked_lm(tiny_bert_dir)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    out = capsys.readouterr().out
    assert "cls.predictions.transform.dense.weight" in out and "initialised new" in out
    assert "pooler" in out and "tied to the word embeddings" in out


def test_the_loss_on_selected_wordpieces_is_the_models_own(tiny_bert_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = load_masked_lm(tiny_bert_dir).eval()
    batch = masking_collator(tokenizer, seed=0)(encode_sentences(tokenizer, random_sentences(8), max_length=16))
    assert mlm_head(model) is model.cls
    with torch.no_grad():
        assert masked_lm_loss(model, batch).item() == pytest.approx(model(**batch).loss.item(), rel=1e-5)


@pytest.fixture(scope="module")
def adapted(tiny_bert_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlm")
    text = folder / "train.txt"
    text.write_text("\n".join(random_sentences(40)), encoding="utf8")
    output = folder / "encoder"
    main(
        ["mlm-adapt", "--train-text", str(text), "--encoder", tiny_bert_dir, "--output", str(output)]
        + ["--steps", "4", "--batch-size", "8", "--lr", "1e-3", "--seed", "3"]
    )
    return output


def test_adaptation_changes_the_encoder_and_saves_a_plain_one(tiny_bert_dir, adapted):
    model, info = AutoModel.from_pretrained(adapted, output_loading_info=True)
    assert type(model).__name__ == "BertModel"
    assert not info["missing_keys"] and not info["unexpected_keys"]
    before = AutoModel.from_pretrained(tiny_bert_dir).state_dict()
    after = model.state_dict()
    assert set(before) == set(after)
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert "encoder.layer.0.attention.self.query.weight" in changed
    assert "embeddings.word_embeddings.weight" in changed
    assert not any(name.startswith("pooler.") for name in changed)  # the MLM has no pooler: kept as it was
    assert AutoTokenizer.from_pretrained(adapted).vocab == AutoTokenizer.from_pretrained(tiny_bert_dir).vocab
    summary = json.loads((adapted / ADAPTATION_FILE).read_text(encoding="utf8"))
    assert summary["steps"] == 4 and len(summary["losses"]) == 4 and summary["sentences"] == 40


def test_a_spacy_transformer_runs_on_the_adapted_encoder(adapted):
    nlp = make_transformer_pipeline(str(adapted))
    nlp.initialize()
    doc = nlp("The adapted encoder still gives attention maps.")
    attentions = doc._.trf_data.model_output.attentions
    assert len(attentions) == 2 and attentions[0].shape[1] == 4  # the tiny BERT's layers and heads
    np.testing.assert_allclose(attentions[0].sum(-1)[..., : len(doc)], 1.0, atol=1e-5)
    hf_model = nlp.get_pipe("transformer").model.transformer
    saved = AutoModel.from_pretrained(adapted).embeddings.word_embeddings.weight
    assert torch.equal(hf_model.embeddings.word_embeddings.weight.detach().cpu(), saved.detach())


def test_bad_training_text_is_a_clear_error(tiny_bert_dir, tmp_path):
    with pytest.raises(SystemExit, match="mlm-adapt: error: .*cannot read sentences from a .csv file"):
        main(["mlm-adapt", "--train-text", str(tmp_path / "x.csv"), "--encoder", tiny_bert_dir, "--output", "o"])
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf8")
    with pytest.raises(SystemExit, match="no sentences"):
        main(["mlm-adapt", "--train-text", str(empty), "--encoder", tiny_bert_dir, "--output", "o"])
