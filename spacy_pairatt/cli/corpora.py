"""fetch-ud, ud-docs, fetch-ptb, ptb-convert, fetch-semeval, semeval-convert, fetch-docred, docred-convert:
the data sets into a folder, and converted to .spacy files (`spacy_pairatt.corpora`)."""

import os
import urllib.error
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..packaging.split_encoders import DownloadFailed
from .errors import describe_error


def fetch_ud(args) -> None:
    from ..corpora.ud import fetch_ud_ewt

    with fetch_errors(args):
        fetch_ud_ewt(Path(args.dest), Path(args.local) if args.local else None)


# What a failed download raises; any other OSError is a local one (a full disk, a folder not writable).
DOWNLOAD_ERRORS = (urllib.error.URLError, ConnectionError, TimeoutError, DownloadFailed)


@contextmanager
def fetch_errors(args) -> Iterator[None]:
    """fetch-*: a bad checksum or destination, a file that cannot be written (its path and the cause), or a
    failed download (no network: naming the --local folder, which could have spared it) in one line."""
    try:
        yield
    except ValueError as error:  # a checksum that does not match, a destination that is not the data's
        raise SystemExit(f"python -m spacy_pairatt {args.command}: error: {describe_error(error)}") from error
    except DOWNLOAD_ERRORS as error:
        reason = getattr(error, "reason", None) or describe_error(error)
        if not args.local:
            where = "no --local folder was given"
        elif not Path(args.local).is_dir():
            where = f"the --local folder {args.local} does not exist"
        else:
            where = f"the --local folder {args.local} lacks some of the files"
        message = f"{where}, and the download failed: {reason}"
        raise SystemExit(f"python -m spacy_pairatt {args.command}: error: {message}") from error


def ud_docs(args) -> None:
    """A CoNLL-U file to a .spacy file of its documents, as the segmenter trains on them, or of its
    paragraphs with all their annotation (--paragraphs), as the UD pipeline does."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    from ..corpora.ud_documents import annotated_paragraph_docs, iter_document_docs, read_ud_documents
    from ..parse_files.errors import ParseCommandError
    from ..parse_files.files import check_output_is_not_input
    from ..runs.scratch import naming_path, remove_stale_scratch, scratch_path

    try:
        check_output_is_not_input(args.conllu, args.output)
    except ParseCommandError as error:
        raise SystemExit(f"python -m spacy_pairatt ud-docs: error: {error}") from error
    try:
        with open(args.conllu, encoding="utf8") as file:
            text = file.read()
        documents = read_ud_documents(text.splitlines())
        if documents and args.paragraphs:
            docs = DocBin(store_user_data=False, docs=annotated_paragraph_docs(Vocab(), text))
        else:
            docs = DocBin(attrs=["SENT_START"], docs=iter_document_docs(Vocab(), documents))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SystemExit(f"python -m spacy_pairatt ud-docs: error: {args.conllu}: {describe_error(error)}") from error
    if not documents:
        raise SystemExit(f"python -m spacy_pairatt ud-docs: error: {args.conllu} holds no sentences")
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(output)
    staging = scratch_path(output, "staging")  # written whole, then renamed: a stop leaves no half file
    try:
        with naming_path(output):
            staging.write_bytes(docs.to_bytes())
        os.replace(staging, output)
    finally:
        staging.unlink(missing_ok=True)
    print(f"{len(documents)} documents, {sum(len(doc) for doc in documents)} paragraphs -> {args.output}")


def ptb(args) -> None:
    from ..corpora.ptb import convert_ptb, fetch_ptb

    if args.command == "fetch-ptb":
        with fetch_errors(args):
            fetch_ptb(Path(args.dest), Path(args.local) if args.local else None)
        return
    try:
        convert_ptb(Path(args.src_dir), Path(args.out_dir))
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt ptb-convert: error: {describe_error(error)}") from error


def fetch_relation_data(args) -> None:
    from ..corpora import docred, semeval

    fetch = {"fetch-semeval": semeval.fetch_semeval, "fetch-docred": docred.fetch_docred}[args.command]
    with fetch_errors(args):
        fetch(Path(args.dest), Path(args.local) if args.local else None)


def convert_relation_data(args) -> None:
    from ..corpora import docred, semeval

    if args.command == "semeval-convert":
        semeval.convert_semeval(Path(args.src_dir), Path(args.out_dir), args.markers)
    else:
        docred.convert_docred(Path(args.src_dir), Path(args.out_dir))


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    fetch = commands.add_parser("fetch-ud", help="UD English-EWT 2.16 into a folder (local copy or download)")
    fetch.add_argument("dest")
    fetch.add_argument("--local", help="folder with a local copy of the .conllu files, used when present")
    fetch.set_defaults(func=fetch_ud, records_provenance=False)
    documents = commands.add_parser(
        "ud-docs", help="a CoNLL-U file to a .spacy file of its documents (a blank line between paragraphs)"
    )
    documents.add_argument("conllu")
    documents.add_argument("output", help=".spacy file to write")
    documents.add_argument(
        "--paragraphs",
        action="store_true",
        help="a Doc per paragraph with every annotation (the UD pipeline's training Docs), not a Doc per document",
    )
    documents.set_defaults(func=ud_docs, records_provenance=False)
    fetch_treebank = commands.add_parser(
        "fetch-ptb", help="NLTK's PTB dependency sample (non-commercial) into a folder (local copy or download)"
    )
    fetch_treebank.add_argument("dest")
    fetch_treebank.add_argument("--local", help="folder holding dependency_treebank/ (a local copy), used when present")
    fetch_treebank.set_defaults(func=ptb, records_provenance=False)
    convert_treebank = commands.add_parser(
        "ptb-convert", help="the PTB sample to train/dev/test .spacy files (80/10/10 of the files, in order)"
    )
    convert_treebank.add_argument("src_dir", metavar="SRC_DIR", help="folder holding dependency_treebank/")
    convert_treebank.add_argument("out_dir", metavar="OUT_DIR")
    convert_treebank.set_defaults(func=ptb, records_provenance=False)
    for corpus, what, local, splits in (
        ("semeval", "SemEval-2010 Task 8 train and test files", "SemEval2010_task8_all_data/", "train/dev/test"),
        ("docred", "Re-DocRED dev_revised.json and test_revised.json", "the two files", "train/tune/test"),
    ):
        fetch_corpus = commands.add_parser(f"fetch-{corpus}", help=f"{what} into a folder (local copy or download)")
        fetch_corpus.add_argument("dest")
        fetch_corpus.add_argument("--local", help=f"folder holding {local} (a local copy), used when present")
        fetch_corpus.set_defaults(func=fetch_relation_data, records_provenance=False)
        convert = commands.add_parser(f"{corpus}-convert", help=f"{what} to {splits} .spacy files")
        convert.add_argument("src_dir", metavar="SRC_DIR", help=f"folder holding {local}")
        convert.add_argument("out_dir", metavar="OUT_DIR")
        convert.set_defaults(func=convert_relation_data, records_provenance=False)
        if corpus == "semeval":
            convert.add_argument("--markers", action="store_true", help='"$ e1 $" and "# e2 #" in the text')
