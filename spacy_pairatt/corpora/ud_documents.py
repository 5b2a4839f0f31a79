"""A CoNLL-U file as the raw text it came from: documents of paragraphs of sentences.

UD marks where a document (`# newdoc`) and a paragraph (`# newpar`) begin; raw text shows both as
line breaks. Two things read this shape: `ud-text`, which writes the text a parser is given (a
paragraph a line), and `ud-docs`, which writes training Docs shaped the way raw text arrives: the
segmenter's (a document each, a blank line between its paragraphs, sentence starts only) or, with
--paragraphs, the UD pipeline's (a paragraph each, as `parse` reads it, every annotation kept).
"""

from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional

from spacy.tokens import Doc
from spacy.vocab import Vocab

# What separates two paragraphs of a document in a training Doc: a whitespace token, as spaCy's
# tokenizer makes of a blank line in raw text.
PARAGRAPH_BREAK = "\n\n"


@dataclass
class Sentence:
    """A sentence's words with their SpaceAfter, and its `# text` where the file has one."""

    words: List[str] = field(default_factory=list)
    spaces: List[bool] = field(default_factory=list)
    text: Optional[str] = None

    def raw_text(self) -> str:
        """Its text, runs of whitespace made one space (a tokenizer then meets no whitespace tokens)."""
        if self.text is not None:
            return " ".join(self.text.split())
        return " ".join("".join(word + " " * space for word, space in zip(self.words, self.spaces)).split())


Paragraph = List[Sentence]
Document = List[Paragraph]


def read_ud_documents(lines: Iterable[str]) -> List[Document]:
    """The documents of a CoNLL-U file, each a list of paragraphs of sentences.

    A `# newdoc` starts a document and a paragraph, a `# newpar` a paragraph; a file without
    either is one document of one paragraph. A multiword token's words are its syntactic words;
    the last takes the token's SpaceAfter and the others none, so the text is the token's.
    Raises ValueError on a word line without ten columns or with a non-numeric ID.
    """
    documents: List[Document] = []
    sentence = Sentence()
    new_document = new_paragraph = False
    token_end, token_space = 0, True

    def end_sentence() -> None:
        nonlocal sentence, new_document, new_paragraph, token_end
        if not sentence.words:
            return
        if new_document or not documents:
            documents.append([])
        if new_paragraph or new_document or not documents[-1]:
            documents[-1].append([])
        documents[-1][-1].append(sentence)
        sentence, new_document, new_paragraph, token_end = Sentence(), False, False, 0

    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            words = key.split()
            if words[:1] == ["newdoc"]:
                new_document = True
            elif words[:1] == ["newpar"]:
                new_paragraph = True
            elif key.strip() == "text":
                sentence.text = value.strip()
        elif line.strip():
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"line {number} has {len(columns)} columns, not 10")
            if "." in columns[0]:
                continue  # an empty node: no text
            first, _, last = columns[0].partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise ValueError(f"line {number} has the ID {columns[0]!r}")
            space = "SpaceAfter=No" not in columns[9].split("|")
            if last:
                token_end, token_space = int(last), space
                continue
            inside_token = int(first) <= token_end
            sentence.words.append(columns[1])
            sentence.spaces.append(token_space if int(first) == token_end else (False if inside_token else space))
        else:
            end_sentence()
    end_sentence()
    return documents


def paragraph_text(paragraph: Paragraph) -> str:
    return " ".join(sentence.raw_text() for sentence in paragraph)


def document_doc(vocab: Vocab, document: Document) -> Doc:
    """A training Doc of one document: its words with gold sentence starts, a blank line between
    paragraphs (a whitespace token that starts no sentence), as raw text of it would tokenise."""
    words: List[str] = []
    spaces: List[bool] = []
    sent_starts: List[bool] = []
    for number, paragraph in enumerate(document):
        if number:
            spaces[-1] = False
            words.append(PARAGRAPH_BREAK)
            spaces.append(False)
            sent_starts.append(False)
        for sentence in paragraph:
            words.extend(sentence.words)
            spaces.extend(sentence.spaces)
            sent_starts.extend([True] + [False] * (len(sentence.words) - 1))
    spaces[-1] = False
    return Doc(vocab, words=words, spaces=spaces, sent_starts=sent_starts)


def iter_document_docs(vocab: Vocab, documents: Iterable[Document]) -> Iterator[Doc]:
    return (document_doc(vocab, document) for document in documents)


def document_texts(lines: Iterable[str]) -> List[str]:
    """The raw text of each document, its paragraphs joined by a space (for tokenisation alone)."""
    return [" ".join(paragraph_text(paragraph) for paragraph in document) for document in read_ud_documents(lines)]


def raw_text(lines: Iterable[str], paragraphs: bool = True) -> str:
    """What `ud-text` writes: a paragraph a line, a blank line between documents.

    Read by `parse` (a document a line), each paragraph is a Doc of its own, so a paragraph break
    is a sentence boundary, as it is in the raw text UD's documents come from. paragraphs=False:
    a document a line, its paragraphs joined by a space (raw text with its line breaks lost).
    """
    if not paragraphs:
        return "".join(text + "\n" for text in document_texts(lines))
    documents = read_ud_documents(lines)
    return "\n".join("".join(paragraph_text(paragraph) + "\n" for paragraph in document) for document in documents)


def paragraph_starts(documents: Iterable[Document]) -> List[int]:
    """The index of each paragraph's first sentence, counting the file's sentences in order."""
    starts: List[int] = []
    count = 0
    for document in documents:
        for paragraph in document:
            starts.append(count)
            count += len(paragraph)
    return starts


def annotated_paragraph_docs(vocab: Vocab, text: str) -> List[Doc]:
    """A Doc per paragraph of a CoNLL-U file's text, with every annotation spaCy's converter reads
    (tags, POS, morphology, lemmas, heads, labels, sentence starts) and no space after its last
    word, the shape `parse` gives a paragraph of raw text. Raises ValueError on a malformed word
    line, and where spaCy's converter fails or reads other sentences than the paragraphs hold."""
    from spacy.training.converters import conllu_to_docs

    from .doc_copies import edited_copy

    documents = read_ud_documents(text.splitlines())
    n_sentences = sum(len(paragraph) for document in documents for paragraph in document)
    try:
        sentences = list(conllu_to_docs(text, n_sents=1, no_print=True))
    except (IndexError, KeyError, ValueError) as error:  # its parsing assumes well-formed blocks
        raise ValueError(f"spaCy's CoNLL-U converter cannot read it ({type(error).__name__}: {error})") from error
    if len(sentences) != n_sentences:
        raise ValueError(f"spaCy's CoNLL-U converter reads {len(sentences)} sentences where there are {n_sentences}")
    starts = paragraph_starts(documents)
    docs = []
    for start, end in zip(starts, starts[1:] + [len(sentences)]):
        paragraph = Doc.from_docs(sentences[start:end], ensure_whitespace=True)
        spaces = [bool(token.whitespace_) for token in paragraph]
        spaces[-1] = False
        docs.append(edited_copy(paragraph, [token.text for token in paragraph], spaces, [True] * len(paragraph), vocab))
    return docs
