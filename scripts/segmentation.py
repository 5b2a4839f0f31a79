"""Sentences from raw text: each segmenter alone, and the parser behind each, on UD EWT dev and test.

Raw text is what `ud-text` writes (a paragraph a line; `--documents`: a document a line, its
paragraph breaks lost) and `parse` reads (a Doc a line), scored by `ud-eval` as in the CoNLL 2018
shared task. Tokens, Words and Sentences depend only on the tokenizer and the segmenter; UAS and
LAS on the parser too. The parser is the one of `--parser` (training/pairatt) assembled with each
sentence source as `assemble --senter` would ship it, and the UD English tokenizer the segmenters
were trained on (`parse --tokenizer`; the parser's own is spaCy's); its words/s (median of
`--repeats` parses of the test text, interleaved) is the speed of each whole pipeline.

Writes into --results: segmenter_{name}_{split}.json and parser_{name}_{split}.json (ud-eval
results with provenance), sentence_errors_dev.md and sentence_errors_dev_documents.md (the main
segmenter's errors by kind), segmentation_raw_text.md (the tables) and segmentation_speed.json.

    python bench/segmentation.py --parser training/pairatt/model-best \
        --segmenter training/segmenter_standalone/model-best --listener training/segmenter_listener/model-best \
        --senter training/senter/model-best \
        --work training/segmenter_parses --results results
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import spacy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_pairatt.corpora.ud_documents import paragraph_starts, read_ud_documents  # noqa: E402
from spacy_pairatt.evaluation.ud_errors import error_analysis, sentence_errors_markdown  # noqa: E402
from spacy_pairatt.evaluation.ud_eval import evaluate, ud_results_table, write_results  # noqa: E402
from spacy_pairatt.evaluation.ud_treebank import load_conllu  # noqa: E402
from spacy_pairatt.packaging.shipped_pipeline import put_senter  # noqa: E402
from spacy_pairatt.parse_files.parsing import parse_file  # noqa: E402
from spacy_pairatt.reporting.json_files import read_json, write_json, write_text  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, provenance  # noqa: E402

UD = Path("assets/ud_ewt")
UD_TOKENIZER = "spacy-pairatt.ud_english_tokenizer.v1"
RAW = Path("corpus/ud_ewt_raw")
TEXTS = {
    "dev": RAW / "en_ewt-ud-dev.txt",
    "dev_documents": RAW / "en_ewt-ud-dev-documents.txt",
    "test": RAW / "en_ewt-ud-test.txt",
}
GOLD = {
    "dev": UD / "en_ewt-ud-dev.conllu",
    "dev_documents": UD / "en_ewt-ud-dev.conllu",
    "test": UD / "en_ewt-ud-test.conllu",
}
LABELS = {"dev": "dev", "dev_documents": "dev without paragraph breaks", "test": "test"}


def score(name: str, split: str, system: Path, results: Path, kind: str, errors_md: Optional[Path] = None) -> Path:
    """ud-eval of `system` against the split's gold, written as results/{kind}_{name}_{split}.json."""
    gold_path = GOLD[split]
    gold, predicted = load_conllu(gold_path), load_conllu(system)
    errors = None
    if errors_md is not None:
        starts = paragraph_starts(read_ud_documents(gold_path.read_text(encoding="utf8").splitlines()))
        errors = error_analysis(gold, predicted, top=20, paragraph_starts=starts)
        title = f"# Sentence boundary errors of {name}, EWT {LABELS[split]}, raw text (python bench/segmentation.py)"
        write_text(errors_md, sentence_errors_markdown(errors, title))
    output = results / f"{kind}_{name}_{split}.json"
    write_results(evaluate(gold, predicted), gold_path, system, output, errors=errors)
    return output


def assembled(parser: str, senter: Optional[str], work: Path, name: str) -> str:
    """The parser with the sentence source `senter` (a pipeline path, or None: the sentencizer)."""
    nlp = spacy.load(parser)
    if senter is None:
        nlp.add_pipe("sentencizer", first=True)
    else:
        put_senter(nlp, spacy.load(senter), senter)
    path = work / f"pipeline_{name}"
    nlp.to_disk(path)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parser", required=True, help="a pipeline with a parser and no segmenter")
    parser.add_argument("--segmenter", required=True, help="the shipped pairatt_segmenter (segmenter_standalone.cfg)")
    parser.add_argument("--listener", help="pairatt_segmenter on the parser's transformer (segmenter_listener.cfg)")
    parser.add_argument("--senter", help="spaCy's CNN senter (configs/senter_cnn.cfg)")
    parser.add_argument("--work", default="training/segmenter_parses", help="folder for pipelines and parses")
    parser.add_argument("--results", default="results")
    parser.add_argument("--repeats", type=int, default=3, help="parses of the test text timed per pipeline")
    args = parser.parse_args()
    started = time.time()
    work, results = Path(args.work), Path(args.results)
    work.mkdir(parents=True, exist_ok=True)
    segmenters = {"pairatt_segmenter": args.segmenter}
    if args.listener:
        segmenters["pairatt_segmenter_listener"] = args.listener

    alone: List = []
    for name, path in segmenters.items():
        for split in TEXTS:
            system = work / f"{name}_{split}.conllu"
            parse_file(path, str(TEXTS[split]), str(system), progress=False)
            main_dev = name == "pairatt_segmenter" and split != "test"
            errors_md = results / f"sentence_errors_{split}.md" if main_dev else None
            alone.append((f"{name}, {LABELS[split]}", score(name, split, system, results, "segmenter", errors_md)))

    sources = {"sentencizer": None, **({"cnn_senter": args.senter} if args.senter else {}), **segmenters}
    pipelines = {name: assembled(args.parser, senter, work, name) for name, senter in sources.items()}
    parsed: List = []
    for name, pipeline in pipelines.items():
        for split in ("dev", "test"):
            system = work / f"parser_{name}_{split}.conllu"
            parse_file(pipeline, str(TEXTS[split]), str(system), progress=False, tokenizer=UD_TOKENIZER)
            parsed.append((f"parser + {name}, {split}", score(name, split, system, results, "parser")))

    n_words = len(load_conllu(GOLD["test"]))
    seconds: Dict[str, List[float]] = {name: [] for name in pipelines}
    for _ in range(args.repeats):
        for name, pipeline in pipelines.items():
            begin = time.perf_counter()
            parse_file(pipeline, str(TEXTS["test"]), str(work / "timed.conllu"), progress=False, tokenizer=UD_TOKENIZER)
            seconds[name].append(time.perf_counter() - begin)
    speed = {name: round(n_words / statistics.median(times), 1) for name, times in seconds.items()}
    write_json(
        results / "segmentation_speed.json",
        {"words": n_words, "seconds": seconds, "words_per_second": speed, "provenance": provenance(started=started)},
    )

    def rows(entries):
        return [(name, read_json(path)) for name, path in entries]

    text = "\n".join(
        [
            "# Sentences from raw text (python bench/segmentation.py)",
            "",
            'UD EWT raw text as `ud-text` writes it (a paragraph a line; "without paragraph breaks": a',
            "document a line), parsed by `parse` (a Doc a line) and scored by `ud-eval`.",
            "",
            "## Segmenters alone",
            "",
            ud_results_table(rows(alone), ["Tokens", "Words", "Sentences"]),
            "## The parser behind each segmenter",
            "",
            f"`{args.parser}` with each sentence source as `assemble --senter` puts it and the UD English "
            f"tokenizer; words/s: median of {args.repeats} parses of the test text ({n_words:,} words, whole "
            "pipeline, 2 CPU cores).",
            "",
            ud_results_table(rows(parsed), ["Sentences", "UAS", "LAS"]),
            "| pipeline | words/s |",
            "|---|---|",
            *(f"| parser + {name} | {value:,.0f} |" for name, value in speed.items()),
            "",
        ]
    )
    write_text(results / "segmentation_raw_text.md", text)
    print(text)


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
