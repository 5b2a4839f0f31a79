"""bench/tiers.py: the tier table's words/s in both precisions, the peak RSS of a parse and the disk of a UD
pipeline, run as a user runs it (a tiny one: these figures show the bench works, not what a tier costs)."""

import json
import subprocess
import sys

import spacy
from spacy.tokens import DocBin

from spacy_pairatt.corpora.ud_documents import annotated_paragraph_docs
from tests.conftest import PAPER, UD_DIR, read_conllu_sentences, train_ud_pipeline, write_first_sentences

BENCH = PAPER / "bench" / "tiers.py"


def run_bench(*args):
    return subprocess.run([sys.executable, str(BENCH), *map(str, args)], capture_output=True, text=True, timeout=600)


def test_the_tier_bench_times_both_precisions_and_measures_a_parse_and_the_disk(tiny_bert_dir, tmp_path):
    train_block = write_first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 40, tmp_path / "ewt.conllu")
    docs = annotated_paragraph_docs(spacy.blank("en").vocab, train_block.read_text(encoding="utf8"))
    model = train_ud_pipeline("pipeline_minilm.cfg", tiny_bert_dir, docs, tmp_path)
    test = write_first_sentences(UD_DIR / "en_ewt-ud-test.conllu", 12, tmp_path / "test.conllu")
    test_docs = read_conllu_sentences(test, 12)
    DocBin(docs=test_docs).to_disk(tmp_path / "test.spacy")
    output = tmp_path / "bench_tiers.json"

    done = run_bench("--pipeline", f"tiny={model}", "--test", tmp_path / "test.spacy", "--test-conllu", test,
                     "--repeats", 2, "--output", output)  # fmt: skip

    assert done.returncode == 0, done.stderr
    written = json.loads(output.read_text(encoding="utf8"))
    tier = written["tiers"]["tiny"]
    assert written["words"] == sum(len(doc) for doc in test_docs) and written["input"] == "raw paragraphs"
    assert set(tier["per_second"]) == {"float32", "bfloat16"} and min(tier["per_second"].values()) > 0
    assert len(tier["paired_ratios"]) == 2 and tier["median_paired_ratio"] > 0
    assert tier["disk_bytes"] == sum(file.stat().st_size for file in model.rglob("*") if file.is_file())
    assert 200 < tier["parse_peak_rss_mb"] < 8000  # a process that loaded torch and the pipeline, parsed, ended
    assert written["provenance"]["command"].startswith("python ") and written["provenance"]["created"]


def test_a_folder_that_is_not_a_pipeline_is_one_line_naming_it(tmp_path):
    done = run_bench("--pipeline", f"en_pairatt={tmp_path}", "--output", tmp_path / "out.json")
    assert done.returncode == 2 and not (tmp_path / "out.json").exists()
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line.endswith(f"en_pairatt: {tmp_path} is not a saved pipeline (no config.cfg)")
    assert "Traceback" not in done.stderr
