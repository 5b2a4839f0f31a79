"""docs/ud_pipeline.md's generated blocks: ud-eval results beside the published figures, and the pipeline's
targets read from the files (met or not met); without a file, only the source note, naming it."""

import json
import shutil

from spacy.util import load_config

from docs_build.plan import BLOCKS
from docs_build.results import Results
from spacy_pairatt.evaluation.ud_eval import evaluate_files, write_results
from tests.conftest import REPO, UD_DIR

ud_pipeline_block = BLOCKS["ud-pipeline"]  # the figures, then their source note
PUBLISHED_UD_FILE = ud_pipeline_block["published"]


def first_sentences(path, n: int) -> str:
    return "\n\n".join(path.read_text(encoding="utf8").split("\n\n")[:n]) + "\n\n"


def copy_checkout_parts(root):
    """The committed files behind the ud-pipeline block, and the configs its trainings' steps come from."""
    for path in [path for path, _ in ud_pipeline_block.sources(Results(REPO))] + [PUBLISHED_UD_FILE]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, root / path)
    shutil.copytree(REPO / "configs", root / "configs")


def bar_row(block: str, name: str) -> str:
    return next(line for line in block.splitlines() if line.startswith(f"| {name} |"))


def test_the_block_reads_ud_eval_results_and_prints_every_published_row(tmp_path):
    gold_text = first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 30)
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(gold_text, encoding="utf8")
    lines, changed, words = [], 0, 0
    for line in gold_text.splitlines():  # every 10th word tagged X: UPOS falls below the 96.0 bar
        columns = line.split("\t")
        if len(columns) == 10 and columns[0].isdigit():
            words += 1
            if words % 10 == 0 and columns[3] != "X":
                columns[3], changed = "X", changed + 1
        lines.append("\t".join(columns))
    system.write_text("\n".join(lines) + "\n", encoding="utf8")
    copy_checkout_parts(tmp_path)
    write_results(evaluate_files(gold, system), gold, system, tmp_path / "results/ud_pipeline_test_gold_tokens.json")

    block = ud_pipeline_block(Results(tmp_path))

    assert f"| UPOS, EWT test, gold tokens | 96.00 | {100 * (words - changed) / words:.2f} | **not met** |" in block
    assert bar_row(block, "Lemmas, EWT test, gold tokens").endswith("| 100.00 | met |")
    docs = json.loads((REPO / "results/ud_pipeline_dev_docs.json").read_text(encoding="utf8"))["scores"]
    assert bar_row(block, "sentence F, EWT dev Docs of 10 sentences").startswith(
        f"| sentence F, EWT dev Docs of 10 sentences | 85.00 | {100 * docs['sents_f']:.2f} |"
    )
    assert "| this pipeline, gold tokens | EWT 2.16 test | 100.00 |" in block  # Tokens
    published = json.loads((REPO / PUBLISHED_UD_FILE).read_text(encoding="utf8"))["rows"]
    for row in published:
        assert f"| {row['system']}, {row['input']} | {row['data']} |" in block
        assert row["source"] in block
    (tmp_path / "results/ud_pipeline_dev_raw_text.json").unlink()
    block = ud_pipeline_block(Results(tmp_path))
    assert block.startswith("*Source: ") and "not measured yet: `results/ud_pipeline_dev_raw_text.json`" in block


def test_the_bars_give_every_trainings_cost_from_their_files(tmp_path):
    """run_cost's files of the pipeline (its segmenter trained with it) and of the parser alone side by
    side, each with the steps of the config its command trained (the command's overrides included)."""
    runs = {
        "train_ud_pipeline_cost.json": (
            5400.0, 2900.4, "python -m spacy train configs/pipeline_minilm.cfg --output a --training.max_steps 7",
        ),
        "train_pairatt_cost.json": (3316.0, 2297.2, "python -m spacy train configs/parser_minilm.cfg --gpu-id -1"),
    }  # fmt: skip
    copy_checkout_parts(tmp_path)  # the steps come from the checkout's configs
    for cost, (wall, rss, command) in runs.items():
        (tmp_path / "results" / cost).write_text(
            json.dumps({"wall_seconds": wall, "peak_rss_mb": rss, "command": command})
        )
    block = ud_pipeline_block(Results(tmp_path))
    steps = [7, load_config(REPO / "configs" / "parser_minilm.cfg")["training"]["max_steps"]]
    line = "; ".join(
        f"{what} {n} steps in {wall / 60:.0f} min, peak RSS {rss:,.0f} MB (`{command}`)"
        for what, n, (wall, rss, command) in zip(
            ("stage 1 (all components, its segmenter included)", "the parser alone"), steps, runs.values()
        )
    )
    assert f"Training: {line}." in block
    (tmp_path / "results" / "train_pairatt_cost.json").unlink()
    assert "not measured yet: `results/train_pairatt_cost.json`" in ud_pipeline_block(Results(tmp_path))


def test_the_errors_block_counts_the_wrong_lemmas_and_boundaries_of_ud_eval_errors(tmp_path):
    ud_errors_block = BLOCKS["ud-errors"]

    from spacy_pairatt.evaluation.ud_errors import error_analysis
    from spacy_pairatt.evaluation.ud_treebank import load_conllu

    gold_text = first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 30)
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(gold_text, encoding="utf8")
    assert ud_errors_block(Results(tmp_path)).startswith("*not measured yet: `results/ud_pipeline_dev_raw_text.json`")
    path = tmp_path / "results/ud_pipeline_dev_raw_text.json"
    perfect = load_conllu(gold)  # no wrong lemma: no share of 0 to divide by
    write_results(evaluate_files(gold, gold), gold, gold, path, errors=error_analysis(perfect, perfect))
    assert "**Lemmas**: 0 wrong of" in ud_errors_block(Results(tmp_path))
    lines, capitalised = [], 0
    for line in gold_text.splitlines():  # every capitalised form's lemma becomes the form: a case error
        columns = line.split("\t")
        if len(columns) == 10 and columns[0].isdigit() and columns[1][:1].isupper():
            capitalised += columns[2] != columns[1] and columns[2].lower() == columns[1].lower()
            columns[2] = columns[1]
        lines.append("\t".join(columns))
    system.write_text("\n".join(lines) + "\n", encoding="utf8")
    gold_bank, system_bank = load_conllu(gold), load_conllu(system)
    write_results(evaluate_files(gold, system), gold, system, path, errors=error_analysis(gold_bank, system_bank))

    block = ud_errors_block(Results(tmp_path))

    errors = json.loads(path.read_text())["errors"]
    assert capitalised > 5 and errors["lemmas"]["kinds"]["case"] == capitalised
    assert f"by kind: case {capitalised:,} (" in block
    assert "| missed | 0 | 0 |" in block and "| false | 0 | 0 |" in block
    assert "`results/ud_pipeline_dev_raw_text.json`" in block


def test_the_tokenizer_effect_block_subtracts_spacys_tokenizer_from_the_pipelines(tmp_path):
    tokenizer_effect_block = BLOCKS["tokenizer-effect"]

    gold = tmp_path / "gold.conllu"
    gold.write_text(first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 20), encoding="utf8")
    (ours, ours_path, _), (stock, stock_path, _) = tokenizer_effect_block.files["rows"]
    write_results(evaluate_files(gold, gold), gold, gold, tmp_path / ours_path)
    assert f"not measured yet: `{stock_path}`" in tokenizer_effect_block(Results(tmp_path))
    lines = gold.read_text(encoding="utf8").splitlines()
    relabelled = [  # every relation but the root's becomes `dep`: only LAS and MLAS fall
        "\t".join(c[:7] + ["dep" if c[7] != "root" else "root"] + c[8:]) if len(c := line.split("\t")) == 10 else line
        for line in lines
    ]
    system = tmp_path / "system.conllu"
    system.write_text("\n".join(relabelled) + "\n", encoding="utf8")
    write_results(evaluate_files(gold, system), gold, system, tmp_path / stock_path)

    block = tokenizer_effect_block(Results(tmp_path))

    las = 100 * evaluate_files(gold, system)["LAS"].f1
    assert las < 90
    assert f"| {ours} | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 |" in block
    assert (
        f"| UD English minus spaCy English | +0.00 | +0.00 | +0.00 | +0.00 | +0.00 | +0.00 | {100 - las:+.2f} |"
        in block
    )
