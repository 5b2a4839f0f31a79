"""The shipped UD pipelines side by side, for the tier table (README and both model cards, `tiers` block).

For each pipeline: its words/s on EWT test's raw paragraphs in float32 and in bfloat16 (bench/precision.py's
rounds in turns and paired ratios), the peak RSS of `python -m spacy_pairatt parse` over that raw text in a
process of its own (the pipeline's own precision, recorded: what a user's parse takes), and its folder's bytes on
disk.
Words are the gold file's syntactic words.

    python bench/tiers.py --pipeline en_pairatt=training/ud_pipeline_segmented \
        --pipeline en_pairatt_trf=training/ud_pipeline_trf_segmented --output results/bench_tiers.json
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy
import torch
from pipelines import load_docs
from precision import raw_paragraphs, time_parsing
from spacy.util import load_config
from ud_pipeline_speed import named_path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spacy_pairatt.corpora.ud_documents import raw_text  # noqa: E402
from spacy_pairatt.layers.precision import cpu_has_native_bfloat16  # noqa: E402
from spacy_pairatt.reporting.json_files import write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, provenance  # noqa: E402

PROG = "bench/tiers.py"


def folder_bytes(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def parse_peak_rss_mb(pipeline: Path, text: Path, scratch: Path) -> float:
    """The peak RSS of a `parse` of `text` with `pipeline`, in MB: that child's own (os.wait4), not the bench's."""
    command = [sys.executable, "-m", "spacy_pairatt", "parse", str(pipeline), str(text)]
    command += ["--output", str(scratch / "parsed.conllu"), "--no-progress"]
    with open(scratch / "parse.log", "w+", encoding="utf8") as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            last = (log.read().strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"{PROG}: error: parse with {pipeline} failed: {last}")
    return round(usage.ru_maxrss / 1024, 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", type=named_path, action="append", required=True, metavar="NAME=PATH",
                        help="a saved UD pipeline (a tier), in the table's order")  # fmt: skip
    parser.add_argument("--test", default="corpus/ud_ewt/en_ewt-ud-test.spacy")
    parser.add_argument("--test-conllu", default="assets/ud_ewt/en_ewt-ud-test.conllu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default="results/bench_tiers.json")
    args = parser.parse_args(argv)
    for name, path in args.pipeline:
        if not (Path(path) / "config.cfg").exists():
            parser.error(f"{name}: {path} is not a saved pipeline (no config.cfg)")
    started = time.time()
    docs = load_docs(Path(args.test), spacy.blank("en"))
    conllu = Path(args.test_conllu)
    texts = raw_paragraphs(conllu)
    tiers = {}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        text_file = scratch / "test.txt"
        text_file.write_text(raw_text(conllu.read_text(encoding="utf8").splitlines()), encoding="utf8")
        for name, path in args.pipeline:
            speed = time_parsing(Path(path), texts, docs, True, False, args.repeats, args.batch_size)
            transformer = load_config(Path(path) / "config.cfg")["components"]["transformer"]["model"]
            tiers[name] = {
                "source": path,
                "precision": transformer.get("precision", "float32"),  # what it parses in unless told otherwise
                "disk_bytes": folder_bytes(Path(path)),
                "parse_peak_rss_mb": parse_peak_rss_mb(Path(path), text_file, scratch),
                **speed,
            }
            print(f"{name}: {speed['per_second']} words/s, {tiers[name]['parse_peak_rss_mb']:,.0f} MB parsing")
    write_json(
        Path(args.output),
        {
            "test": args.test_conllu,
            "input": "raw paragraphs",
            "words": sum(len(doc) for doc in docs),
            "torch_threads": torch.get_num_threads(),
            "native_bfloat16": cpu_has_native_bfloat16(),
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "tiers": tiers,
            "provenance": provenance(started=started),
        },
    )


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
