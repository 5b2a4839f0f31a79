"""Known limits: the docs, the README and the model card state the same ones, some with measured figures."""

from typing import Callable, List, Tuple

from ..evaluation.parser_eval import percent
from .results import Results


def speed_limit(results: Results) -> str:
    speed = results.json("results/bench_speed.json")
    if speed is None:
        return "Speed: not measured yet (`python -m spacy project run bench`)."
    inference = speed["inference"]
    stale = results.made("results/bench_speed.json", "bench").stale_since()
    when = f"; stale: measured before {stale.what}" if stale else ""
    threads = speed["machine"].get("torch_threads", "?")
    weights = "trained pipelines" if speed.get("weights", "").startswith("trained") else "untrained weights"
    return (
        f"Speed (results/bench.md, {weights}, {threads} torch threads{when}): "
        f"transformer + pairatt_parser ran at {inference['ratio_b_over_a']:.2f} times the transformer's own "
        f"speed (target 0.85); spaCy's transition parser on the same encoder, without attention output, "
        f"ran at {1 / inference['ratio_b_over_c_wordpiece_batched']:.2f} times pairatt's speed with the same "
        "wordpiece batching."
    )


def attention_memory_limit(results: Results) -> str:
    memory = results.json("results/bench_memory.json")
    kept = "" if memory is None else (
        f" (on EWT {memory['bytes_kept_per_doc']['no release component'] / 1e3:,.0f} kB a Doc kept without it, "
        f"{memory['bytes_kept_per_doc']['release'] / 1e3:,.0f} kB with it; results/bench.md)"
    )  # fmt: skip
    return (
        "The attention tensors stay on `Doc._.trf_data` unless `pairatt_release_attention` runs after the "
        f"parser{kept}; the shipped pipeline has it."
    )


def attention_gradient_limit(results: Results) -> str:
    ablation = results.json("results/ablation.json")
    compare = results.json("results/pairatt_test.json")
    measured = ""
    if ablation is not None and compare is not None:
        rows = {row["key"]: row for row in ablation["datasets"]["ewt"]["rows"]}
        mst = (rows.get("ft_emb_att_mst") or {}).get("test") or {}
        if mst.get("uas") is not None:
            measured = (
                f" At the same budget on EWT it did not beat the default: {mst['uas']:.1f} test UAS with MST "
                f"(Table 1's ft:emb+att, results/ablation.json) against {percent(compare['scores']['dep_uas'])} "
                "(results/pairatt_test.json), two runs, not a paired comparison."
            )
    return (
        "With the default config (`parser_minilm.cfg`) attention gradients do not reach the encoder: "
        "spacy-transformers sends gradients back only through `last_hidden_state`, so attention enters as a "
        "feature; `configs/parser_minilm_ftatt.cfg` carries them through the attention as well." + measured
    )


def unsegmented_limit(results: Results) -> str:
    from ..core.features import MAX_UNSEGMENTED_TOKENS

    return (
        "Every sentence is one tree, whatever its length; memory grows with the square of its tokens (the "
        "pair scores). A Doc *without* sentence boundaries over "
        f"{MAX_UNSEGMENTED_TOKENS:,} tokens (`features.MAX_UNSEGMENTED_TOKENS`) is split where spaCy's rule-based "
        "sentencizer finds sentence ends, with a warning naming the Doc."
    )


def segmenter_limit(results: Results) -> str:
    senter = results.json("results/pairatt_dev_docs_senter.json")
    gold = results.json("results/pairatt_dev_docs_gold.json")
    figures = ""
    if senter is not None and gold is not None:
        figures = (
            f" (EWT dev Docs of 10 sentences: LAS {percent(senter['scores']['dep_las'])} with the senter against "
            f"{percent(gold['scores']['dep_las'])} with gold sentences; docs/parser.md)"
        )
    return (
        "On raw text the sentence boundaries come from a small CNN senter trained on EWT; its errors become "
        f"parse errors, since each sentence gets its own tree{figures}."
    )


LIMITS: Tuple[Callable[[Results], str], ...] = (
    lambda results: (
        "English web text only (UD English-EWT); accuracy on other genres (news, legal, speech, social media) "
        "is not measured."
    ),
    lambda results: "Predicts heads and UD dependency labels only: no tags, lemmas, morphology or entities.",
    segmenter_limit,
    attention_gradient_limit,
    speed_limit,
    lambda results: (
        "Pooling to words runs in torch on the transformer's device; the loss and decoding run on the host. "
        "Tested on CPU only: the GPU config is untested."
    ),
    attention_memory_limit,
    unsegmented_limit,
    lambda results: (
        "A sentence longer than the window (128 tokens by default) is read in overlapping windows; word pairs "
        "further apart than the overlap share no window and get zero attention plus an indicator."
    ),
    lambda results: (
        "Creating a `pairatt_parser` fixes glibc's malloc mmap and trim thresholds for the whole process "
        "(`spacy_pairatt/components/memory.py`): the batch-shaped feature arrays otherwise fragment the heap."
    ),
    lambda results: (
        "A saved pipeline whose encoder sits in spacy-transformers' stock `transformer` component loads with "
        "SDPA attention, which warns and falls back to the manual attention to return the weights (parses are "
        "the same); `pairatt_transformer` rebuilds the encoder with the `attn_implementation` its config names."
    ),
    lambda results: "Needs `spacy-pairatt` (the components' code) and its pinned stack.",
)


def limits(results: Results) -> List[str]:
    return [limit(results) for limit in LIMITS]


def limits_block(results: Results) -> str:
    """Known limits (README, docs/parser.md and, through `model_card_notes`, the model card)."""
    return "\n".join(f"- {text}" for text in limits(results)) + "\n"
