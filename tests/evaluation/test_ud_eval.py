"""The CoNLL 2018 metrics (spacy_pairatt/evaluation/ud_eval.py) on hand-worked examples and on UD English-EWT.

Each expected figure is worked out in a comment from the task's definitions: P = correct / system
words, R = correct / gold words, F1 = 2 * correct / (gold + system), AlignedAccuracy = correct /
aligned pairs (content words only for CLAS, MLAS and BLEX).
"""

import random
import re
from pathlib import Path

import numpy as np
import pytest

from spacy_pairatt.cli import main
from spacy_pairatt.corpora.ud_documents import document_texts
from spacy_pairatt.evaluation.ud_eval import METRICS, align_words, evaluate
from spacy_pairatt.evaluation.ud_treebank import (
    CONTENT_RELATIONS,
    FUNCTION_RELATIONS,
    UDEvalError,
    load_conllu,
    read_treebank,
    universal_feats,
)
from tests.conftest import UD_DIR

EWT_DEV = UD_DIR / "en_ewt-ud-dev.conllu"


def conllu(*sentences: str) -> str:
    """CoNLL-U from rows of space-separated columns ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL; a row
    of two columns (a multiword token "2-3 don't") gets `_` for the rest."""
    blocks = []
    for sentence in sentences:
        lines = []
        for row in filter(str.strip, sentence.splitlines()):
            columns = row.split()
            columns += ["_"] * (10 - len(columns))
            lines.append("\t".join(columns))
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)


def scores(gold: str, system: str):
    return evaluate(read_treebank(gold.splitlines(True), "gold"), read_treebank(system.splitlines(True), "system"))


def prf(score):
    return pytest.approx((score.precision, score.recall, score.f1))


DOG = """
1 The   the  DET   DT  Definite=Def|PronType=Art        2 det
2 dog   dog  NOUN  NN  Number=Sing                      3 nsubj
3 barks bark VERB  VBZ Number=Sing|Person=3|Tense=Pres  0 root
4 .     .    PUNCT .   _                                3 punct
"""


def test_identical_files_score_100_everywhere():
    result = scores(conllu(DOG, DOG), conllu(DOG, DOG))
    for metric in METRICS:
        assert (result[metric].precision, result[metric].recall, result[metric].f1) == (1.0, 1.0, 1.0), metric
        assert result[metric].aligned_accuracy in (None, 1.0), metric
    # 8 words, 8 tokens, 2 sentences; content words: dog, barks in each sentence.
    assert (result["Words"].gold, result["Tokens"].gold, result["Sentences"].gold, result["CLAS"].gold) == (8, 8, 2, 4)
    assert result["Words"].aligned_accuracy is None and result["UPOS"].aligned_accuracy == 1.0


def test_wrong_head_and_wrong_label():
    system = DOG.replace("3 nsubj", "3 obj").replace("3 punct", "2 punct")
    result = scores(conllu(DOG), conllu(system))
    # UAS: the "." head is wrong, 3 of 4 right.
    assert result["UAS"].correct == 3 and prf(result["UAS"]) == (0.75, 0.75, 0.75)
    # LAS: also "dog" (obj for nsubj): 2 of 4 (The, barks).
    assert prf(result["LAS"]) == (0.5, 0.5, 0.5)
    # CLAS: content words are dog and barks on both sides ("The" det is a function word, "." punct
    # neither); barks is right, dog's label wrong: 1 of 2.
    assert (result["CLAS"].correct, result["CLAS"].gold, result["CLAS"].system) == (1, 2, 2)
    assert prf(result["CLAS"]) == (0.5, 0.5, 0.5) and result["CLAS"].aligned_accuracy == 0.5
    # MLAS and BLEX: barks only (tags, features, lemma and its function children all agree): 1 of 2.
    assert prf(result["MLAS"]) == (0.5, 0.5, 0.5) and prf(result["BLEX"]) == (0.5, 0.5, 0.5)
    # Tags and lemmas untouched.
    assert result["UPOS"].f1 == result["Lemmas"].f1 == 1.0


def test_function_word_errors_count_in_las_and_mlas_but_not_clas():
    system = DOG.replace("2 det", "3 det")  # "The" hangs from barks instead of dog
    result = scores(conllu(DOG), conllu(system))
    # UAS = LAS: 3 of 4.
    assert prf(result["UAS"]) == (0.75, 0.75, 0.75) and prf(result["LAS"]) == (0.75, 0.75, 0.75)
    # CLAS: "The" is no content word; dog and barks are right: 2 of 2.
    assert prf(result["CLAS"]) == (1.0, 1.0, 1.0)
    # MLAS: dog's function children are [The det] in gold and [] in the system; barks's are [] and
    # [The det]: both content words wrong, 0 of 2.
    assert result["MLAS"].correct == 0 and prf(result["MLAS"]) == (0.0, 0.0, 0.0)
    # BLEX reads no children: 2 of 2.
    assert prf(result["BLEX"]) == (1.0, 1.0, 1.0)


def test_lemma_and_feature_errors_in_mlas_and_blex():
    system = DOG.replace("barks bark", "barks barks").replace("Definite=Def", "Definite=Ind")
    # barks's features reordered and with non-universal ones (Typo, NumForm): still the same UFeats.
    system = system.replace("Number=Sing|Person=3|Tense=Pres", "Tense=Pres|Typo=Yes|Person=3|NumForm=Word|Number=Sing")
    result = scores(conllu(DOG), conllu(system))
    # Lemmas: barks wrong, 3 of 4. UFeats and AllTags: The wrong, 3 of 4. UPOS, XPOS, LAS: 4 of 4.
    assert prf(result["Lemmas"]) == (0.75, 0.75, 0.75)
    assert prf(result["UFeats"]) == (0.75, 0.75, 0.75) and prf(result["AllTags"]) == (0.75, 0.75, 0.75)
    assert result["UPOS"].f1 == result["XPOS"].f1 == result["LAS"].f1 == result["CLAS"].f1 == 1.0
    # MLAS: dog's function child "The" has other features (dog wrong); barks right: 1 of 2.
    assert prf(result["MLAS"]) == (0.5, 0.5, 0.5)
    # BLEX: dog right, barks's lemma wrong: 1 of 2.
    assert prf(result["BLEX"]) == (0.5, 0.5, 0.5)


def test_universal_features_only_and_gold_underscore_lemma_accepts_any():
    assert universal_feats("Typo=Yes|Number=Sing|ExtPos=ADV|Case=Nom") == "Case=Nom|Number=Sing"
    assert universal_feats("_") == ""
    gold = DOG.replace("dog  NOUN", "_    NOUN")  # dog's gold lemma is `_`
    result = scores(conllu(gold), conllu(DOG))
    assert result["Lemmas"].f1 == result["BLEX"].f1 == 1.0


HOME = """
1 He     he     PRON  PRP _ 2 nsubj
2 walked walk   VERB  VBD _ 0 root
3 home   home   ADV   RB  _ 2 advmod
4 .      .      PUNCT .   _ 2 punct
"""


def test_a_token_split_in_two():
    system = """
    1 He   he   PRON  PRP _ 2 nsubj
    2 walk walk VERB  VB  _ 0 root
    3 ed   ed   X     AFX _ 2 dep
    4 home home ADV   RB  _ 2 advmod
    5 .    .    PUNCT .   _ 2 punct
    """
    result = scores(conllu(HOME), conllu(system))
    # Tokens: He, home, . match (walked != walk + ed): 3 of 5 system, 3 of 4 gold, F1 6/9.
    assert prf(result["Tokens"]) == (3 / 5, 3 / 4, 6 / 9)
    # Words: the same 3 pairs.
    assert prf(result["Words"]) == (3 / 5, 3 / 4, 6 / 9)
    # UPOS: the 3 aligned pairs agree: P 3/5, R 3/4, AlignedAccuracy 3/3.
    assert prf(result["UPOS"]) == (3 / 5, 3 / 4, 6 / 9) and result["UPOS"].aligned_accuracy == 1.0
    # UAS: every aligned word's head (walked) has no system partner: 0 right.
    assert result["UAS"].correct == 0 and result["LAS"].f1 == 0.0


def test_two_tokens_merged():
    system = """
    1 He     he     PRON  PRP _ 2 nsubj
    2 walked walk   VERB  VBD _ 0 root
    3 home.  home   ADV   RB  _ 2 advmod
    """
    result = scores(conllu(HOME), conllu(system))
    # Tokens and Words: He, walked match: P 2/3, R 2/4, F1 4/7.
    assert prf(result["Tokens"]) == (2 / 3, 2 / 4, 4 / 7) and prf(result["Words"]) == (2 / 3, 2 / 4, 4 / 7)
    # UAS: He (head walked, aligned) and walked (root) right: 2 -> P 2/3, R 2/4.
    assert prf(result["UAS"]) == (2 / 3, 2 / 4, 4 / 7) and result["UAS"].aligned_accuracy == 1.0


SHE = """
1 She she PRON  PRP _ 2 nsubj
2 ran run VERB  VBD _ 0 root
3 .   .   PUNCT .   _ 2 punct
"""


def test_two_sentences_merged_into_one():
    merged = (
        HOME
        + """
    5 She she PRON  PRP _ 6 nsubj
    6 ran run VERB  VBD _ 2 parataxis
    7 .   .   PUNCT .   _ 6 punct
    """
    )
    result = scores(conllu(HOME, SHE), conllu(merged))
    # Sentences: gold [0,13) and [13,20) (He walked home . = 13 characters, She ran . = 7); system
    # [0,20): 0 right, P 0/1, R 0/2.
    assert (result["Sentences"].correct, result["Sentences"].gold, result["Sentences"].system) == (0, 2, 1)
    assert result["Tokens"].f1 == result["Words"].f1 == 1.0
    # UAS: ran's head is walked instead of the root: 6 of 7.
    assert prf(result["UAS"]) == (6 / 7, 6 / 7, 6 / 7)


HE_WALKED = """
1 He     he   PRON  PRP _ 2 nsubj
2 walked walk VERB  VBD _ 0 root
"""  # HOME cut after its verb


def test_a_sentence_split_in_two():
    second = """
    1 home   home ADV   RB  _ 0 root
    2 .      .    PUNCT .   _ 1 punct
    """
    result = scores(conllu(HOME, SHE), conllu(HE_WALKED, second, SHE))
    # Sentences: system [0,8), [8,13), [13,20); only [13,20) is a gold sentence: P 1/3, R 1/2, F1 2/5.
    assert prf(result["Sentences"]) == (1 / 3, 1 / 2, 2 / 5)
    # UAS: home (root, gold head walked) and . (head home, gold walked) wrong: 5 of 7.
    assert prf(result["UAS"]) == (5 / 7, 5 / 7, 5 / 7)


DONT = """
1   I     I    PRON  PRP _ 4 nsubj
2-3 don't
2   do    do   AUX   VBP _ 4 aux
3   n't   not  PART  RB  _ 4 advmod
4   know  know VERB  VB  _ 0 root
5   .     .    PUNCT .   _ 4 punct
"""


def test_multiword_token_split_without_a_multiword_line():
    # spaCy's way: do and n't are two tokens of their own.
    system = """
    1 I    I    PRON  PRP _ 4 nsubj
    2 do   do   AUX   VBP _ 4 aux
    3 n't  not  PART  RB  _ 4 advmod
    4 know know VERB  VB  _ 0 root
    5 .    .    PUNCT .   _ 4 punct
    """
    result = scores(conllu(DONT), conllu(system))
    # Tokens: gold I, don't, know, .; system I, do, n't, know, .: 3 match, P 3/5, R 3/4.
    assert prf(result["Tokens"]) == (3 / 5, 3 / 4, 6 / 9)
    # Words: do and n't fall in the multiword region of "don't" and align by form: all 5.
    for metric in ("Words", "UPOS", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX"):
        assert result[metric].f1 == 1.0, metric


def test_multiword_token_left_whole():
    system = """
    1 I     I     PRON  PRP _ 3 nsubj
    2 don't don't AUX   VBP _ 3 aux
    3 know  know  VERB  VB  _ 0 root
    4 .     .     PUNCT .   _ 3 punct
    """
    result = scores(conllu(DONT), conllu(system))
    assert result["Tokens"].f1 == 1.0
    # Words: don't matches neither do nor n't: 3 pairs, P 3/4, R 3/5, F1 6/9.
    assert prf(result["Words"]) == (3 / 4, 3 / 5, 6 / 9)
    # LAS: I, know, . keep their heads (know) and labels: 3 -> P 3/4, R 3/5.
    assert prf(result["LAS"]) == (3 / 4, 3 / 5, 6 / 9)
    # MLAS: gold content words I (nsubj), n't (advmod), know (root): 3; system I, know: 2. I is right
    # (no function children); know has gold function child [do aux] and system [don't aux] whose
    # system word is aligned to nothing: wrong. 1 right: P 1/2, R 1/3.
    assert (result["MLAS"].gold, result["MLAS"].system, result["MLAS"].correct) == (3, 2, 1)


DEL = """
1   Salió  salir  VERB  _ _ 0 root
2-3 del
2   de     de     ADP   _ _ 4 case
3   el     el     DET   _ _ 4 det
4   parque parque NOUN  _ _ 1 obl
"""


def test_del_style_multiword_tokens():
    # The same multiword token with other letter case in its words: forms align case-blind.
    same = DEL.replace("2   de ", "2   De ").replace("3   el ", "3   EL ")
    assert all(score.f1 == 1.0 for score in scores(conllu(DEL), conllu(same)).values())
    whole = """
    1 Salió  salir  VERB _ _ 0 root
    2 del    del    ADP  _ _ 3 case
    3 parque parque NOUN _ _ 1 obl
    """
    result = scores(conllu(DEL), conllu(whole))
    # Tokens all match; Words: Salió and parque: P 2/3, R 2/4, F1 4/7.
    assert result["Tokens"].f1 == 1.0 and prf(result["Words"]) == (2 / 3, 2 / 4, 4 / 7)
    # UAS: Salió (root) and parque (head Salió) right: 2.
    assert result["UAS"].correct == 2


def words(*tokens: str) -> str:
    """CoNLL-U of one sentence from tokens: "abc a b c" is a multiword token abc of words a, b, c."""
    rows, n = [], 0
    for token in tokens:
        form, *parts = token.split()
        if parts:
            rows.append(f"{n + 1}-{n + len(parts)} {form}")
        for part in parts or [form]:
            n += 1
            rows.append(f"{n} {part} _ _ _ _ {0 if n == 1 else 1} {'root' if n == 1 else 'dep'}")
    return conllu("\n".join(rows))


def test_multiword_region_grows_until_no_multiword_token_sticks_out():
    # Gold abc = a BX c and def = d EX f; system ab = a b, cd = c d, ef = e f. The region starts at
    # abc [0,3), takes in cd [2,4), then def [3,6), then ef [4,6): all 6 + 6 words. Longest common
    # subsequence of a bx c d ex f and a b c d e f: a c d f, 4 pairs.
    gold, system = words("abc a BX c", "def d EX f"), words("ab a b", "cd c d", "ef e f")
    g, s = align_words(read_treebank(gold.splitlines(True)), read_treebank(system.splitlines(True)))
    assert g.tolist() == [0, 2, 3, 5] and s.tolist() == [0, 2, 3, 5]
    assert prf(scores(gold, system)["Words"]) == (4 / 6, 4 / 6, 4 / 6)


@pytest.mark.parametrize(
    "gold, system, aligned",
    [
        (["a", "b", "c"], ["a", "b", "c"], 3),
        (["abc a b c"], ["a", "b", "c"], 3),  # the multiword token's words found one by one
        (["a", "bc b c", "d"], ["a", "b", "c", "d"], 4),
        (["abcd a b c d"], ["ab a b", "cd c d"], 4),  # two system multiword tokens inside one gold one
        (["abc a b c", "de d e"], ["a", "bcd b c d", "e"], 5),  # overlapping multiword tokens
        (["abcd"], ["a", "b", "c", "d"], 0),  # no span in common
        (["abc", "d"], ["a", "b", "c", "d"], 1),  # d
        (["a", "bc", "d"], ["a", "b", "c", "d"], 2),  # a, d
        (["a", "bc b c", "d"], ["a", "b", "cd"], 2),  # a; b in the region of bc (cd sticks out)
        (["ab a b", "cd bc d"], ["a", "bc", "d"], 2),  # a and d by form; gold bc is no system word
        (["a", "bc b c", "d"], ["ab AX BX", "cd CX a"], 1),  # one region; only a ~ the system's word a
    ],
)
def test_word_alignment_counts(gold, system, aligned):
    # Each count worked out from the rules: equal spans outside multiword regions, inside them a
    # longest common subsequence of the lowercased forms.
    result = scores(words(*gold), words(*system))
    assert result["Words"].correct == aligned


@pytest.mark.parametrize(
    "text, message",
    [
        ("1\ta\n\n", "line 1: expected 10 tab-separated columns, found 2"),
        (conllu("1 a _ _ _ _ x root"), "line 1: HEAD 'x' is not a number"),
        (conllu("1 a _ _ _ _ 0 root\n3 b _ _ _ _ 1 dep"), "line 2: word ID 3 where 2 was expected"),
        (conllu("1 a _ _ _ _ 0 root\n2 b _ _ _ _ 0 root"), "line 1: the sentence has 2 roots"),
        (conllu("1 a _ _ _ _ 0 root\n2 b _ _ _ _ 3 dep"), "line 2: HEAD 3 outside a sentence of 2 words"),
        (conllu("1 a _ _ _ _ 0 root\n2 b _ _ _ _ 3 dep\n3 c _ _ _ _ 2 dep"), "line 2: .* cycle"),
        (conllu("1-2 ab\n1 a _ _ _ _ 0 root"), "multiword token ends at word 2 of a sentence of 1"),
    ],
)
def test_malformed_files_fail_with_the_line(text, message):
    with pytest.raises(UDEvalError, match=message):
        read_treebank(text.splitlines(True), "f.conllu")


def test_different_texts_fail_with_the_place():
    with pytest.raises(UDEvalError, match=r"differ .* at character 2: gold 'walkedhome.', system 'runhome.'"):
        scores(conllu(HOME), conllu(HOME.replace("walked", "run")))


def test_empty_nodes_and_comments_are_skipped():
    gold = "# sent_id = 1\n# text = He walked home.\n" + conllu(HOME).replace(
        "3\thome", "2.1\tgo\t_\t_\t_\t_\t_\t_\t_\t_\n3\thome"
    )
    assert all(score.f1 == 1.0 for score in scores(gold, conllu(HOME)).values())


def test_cli_prints_the_table_writes_json_and_fails_in_one_line(tmp_path, capsys):
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(conllu(DOG), encoding="utf8")
    system.write_text(conllu(DOG.replace("3 punct", "2 punct")), encoding="utf8")
    main(["ud-eval", str(gold), str(system), "--output", str(tmp_path / "out" / "scores.json")])
    out = capsys.readouterr().out
    assert re.search(r"^UAS\s+75\.00\s+75\.00\s+75\.00\s+75\.00$", out, re.M)
    import json

    saved = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert saved["metrics"]["UAS"]["f1"] == 0.75 and "provenance" in saved and "errors" not in saved
    main(["ud-eval", str(gold), str(system), "--errors", "5", "--output", str(tmp_path / "out" / "errors.json")])
    assert "Wrong lemmas: 0 (case 0, form_kept 0, other 0)" in capsys.readouterr().out
    saved = json.loads((tmp_path / "out" / "errors.json").read_text())
    assert saved["errors"]["sentence_boundaries"]["missed"]["count"] == 0
    with pytest.raises(SystemExit):
        main(["ud-eval", str(gold), str(system), "--errors", "-1"])
    assert "--errors: must be at least 1, got -1" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"^python -m spacy_pairatt ud-eval: error: .*missing.conllu: No such file"):
        main(["ud-eval", str(gold), str(tmp_path / "missing.conllu")])
    system.write_text("1\tx\n", encoding="utf8")
    with pytest.raises(
        SystemExit, match=r"^python -m spacy_pairatt ud-eval: error: .*system.conllu line 1: expected 10"
    ):
        main(["ud-eval", str(gold), str(system)])


def test_document_texts_from_text_comments_newdoc_and_tokens():
    text = (
        "# newdoc id = a\n# text = He walked  home.\n" + conllu(HOME)
        + "# text = She ran.\n" + conllu(SHE)
        + "# newdoc id = b\n" + conllu(DONT.replace("4 nsubj", "4 nsubj _ SpaceAfter=No"))
    )  # fmt: skip
    # Document a: its two `# text` lines, whitespace runs made one space. Document b has no `# text`:
    # rebuilt from the tokens (don't once, not do n't), no space after I.
    assert document_texts(text.splitlines(True)) == ["He walked home. She ran.", "Idon't know ."]


# UD English-EWT ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ewt_dev_lines():
    if not EWT_DEV.exists():
        pytest.skip(f"UD English-EWT not found at {EWT_DEV}")
    return EWT_DEV.read_text(encoding="utf8").splitlines(True)


def test_ewt_dev_against_itself_is_100_everywhere(ewt_dev_lines):
    gold = load_conllu(EWT_DEV)
    result = evaluate(gold, read_treebank(ewt_dev_lines))
    assert all((s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0) for s in result.values())
    # 2001 sentences, 25,147 words, 359 multiword tokens: a token per word outside them, one per multiword token.
    assert (result["Sentences"].gold, result["Words"].gold) == (2001, 25147)
    assert result["Tokens"].gold == 25147 - int(gold.multiword.sum()) + 359
    assert "".join(document_texts(ewt_dev_lines)).replace(" ", "") == gold.text


def word_rows(lines):
    """Indices of the word lines (not comments, multiword or empty-node lines) and their columns."""
    for i, line in enumerate(lines):
        columns = line.rstrip("\n").split("\t")
        if len(columns) == 10 and columns[0].isdigit():
            yield i, columns


def test_ewt_dev_perturbed_gives_the_expected_lower_scores(ewt_dev_lines):
    lines = list(ewt_dev_lines)
    counts = {"NOUN": 0, "amod": 0, "PROPN lemma": 0, "words": 0, "content": 0}
    for i, columns in word_rows(ewt_dev_lines):
        counts["words"] += 1
        counts["content"] += columns[7].split(":")[0] in CONTENT_RELATIONS
        if columns[3] == "NOUN":
            counts["NOUN"] += 1
            columns[3] = "X"
        if columns[7].split(":")[0] == "amod":
            counts["amod"] += 1
            columns[7] = "nmod"
        if columns[3] == "PROPN" and columns[2] != "_":
            counts["PROPN lemma"] += 1
            columns[2] = "zz" + columns[2]
        lines[i] = "\t".join(columns) + "\n"
    result = evaluate(load_conllu(EWT_DEV), read_treebank(lines))
    n = counts["words"]
    # Every NOUN retagged X: UPOS and AllTags lose exactly those words.
    assert result["UPOS"].correct == result["AllTags"].correct == n - counts["NOUN"]
    assert result["XPOS"].f1 == result["UFeats"].f1 == result["UAS"].f1 == 1.0
    # Every amod relabelled nmod (both content): LAS and CLAS lose exactly those words.
    assert result["LAS"].correct == n - counts["amod"]
    assert result["CLAS"].correct == counts["content"] - counts["amod"]
    # Lemmas lose the PROPN lemmas changed.
    assert result["Lemmas"].correct == n - counts["PROPN lemma"]
    assert result["UPOS"].f1 == pytest.approx(1 - counts["NOUN"] / n)


def merge_sentence_pairs(lines):
    """Sentences 1+2, 3+4, ...: the second's IDs and heads shifted, its root attached to the first's."""
    blocks, block = [], []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    merged = []
    for first, second in zip(blocks[0::2], blocks[1::2]):
        rows = [line.rstrip("\n").split("\t") for line in first if not line.startswith("#")]
        n = max(int(columns[0]) for columns in rows if columns[0].isdigit())
        root = next(columns[0] for columns in rows if columns[0].isdigit() and columns[6] == "0")
        out = [line for line in first]
        for line in second:
            columns = line.rstrip("\n").split("\t")
            if line.startswith("#") or "." in columns[0]:
                continue
            if "-" in columns[0]:
                columns[0] = "-".join(str(int(part) + n) for part in columns[0].split("-"))
            else:
                columns[0] = str(int(columns[0]) + n)
                columns[6], columns[7] = (
                    (root, "parataxis") if columns[6] == "0" else (str(int(columns[6]) + n), columns[7])
                )
            out.append("\t".join(columns) + "\n")
        merged.append("".join(out) + "\n")
    if len(blocks) % 2:
        merged.append("".join(blocks[-1]) + "\n")
    return "".join(merged).splitlines(True), len(blocks)


def test_ewt_dev_with_sentences_merged_in_pairs(ewt_dev_lines):
    lines, n_sentences = merge_sentence_pairs(ewt_dev_lines)
    result = evaluate(load_conllu(EWT_DEV), read_treebank(lines))
    # 2001 sentences: 1000 pairs merged plus the last alone; only that one matches a gold sentence.
    assert (result["Sentences"].gold, result["Sentences"].system, result["Sentences"].correct) == (2001, 1001, 1)
    # Each merged pair's second root gets a head: 1000 arcs wrong.
    assert result["UAS"].correct == result["Words"].gold - n_sentences // 2
    assert result["Words"].f1 == result["Tokens"].f1 == result["UPOS"].f1 == 1.0


def direct_scores(gold, system):
    """The aligned-word metrics one pair at a time, straight from the definitions (no numpy)."""
    g, s = align_words(gold, system)
    gold_of = dict(zip(s.tolist(), g.tolist()))

    def as_gold(head):
        return -1 if head < 0 else gold_of.get(int(head), "not aligned")

    def children_of(bank):
        lists = {}
        for c in range(len(bank)):
            if bank.heads[c] >= 0 and bank.relations[c] in FUNCTION_RELATIONS:
                lists.setdefault(int(bank.heads[c]), []).append(c)
        return lists

    gold_children, system_children = children_of(gold), children_of(system)

    def children(bank, word, mapping):
        lists = gold_children if bank is gold else system_children
        return [(mapping(c), bank.relations[c], bank.upos[c], bank.feats[c]) for c in lists.get(word, [])]

    correct = dict.fromkeys(("UPOS", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX"), 0)
    for gw, sw in zip(g.tolist(), s.tolist()):
        head = gold.heads[gw] == as_gold(system.heads[sw])
        las = head and gold.relations[gw] == system.relations[sw]
        lemma = gold.lemmas[gw] in ("_", system.lemmas[sw])
        content = gold.relations[gw] in CONTENT_RELATIONS
        mlas = (
            las and gold.upos[gw] == system.upos[sw] and gold.feats[gw] == system.feats[sw]
            and children(gold, gw, lambda c: c) == children(system, sw, as_gold)
        )  # fmt: skip
        for metric, ok in (
            ("UPOS", gold.upos[gw] == system.upos[sw]), ("Lemmas", lemma), ("UAS", head), ("LAS", las),
            ("CLAS", content and las), ("MLAS", content and mlas), ("BLEX", content and las and lemma),
        ):  # fmt: skip
            correct[metric] += bool(ok)
    return correct


def test_vectorised_counts_equal_the_direct_definitions_on_random_errors(ewt_dev_lines):
    # The first 150 sentences with random errors: heads moved to the grandparent (no cycles), other
    # labels, tags, features and lemmas, and some multiword tokens written as one word.
    cut = [i for i, line in enumerate(ewt_dev_lines) if not line.strip()][149] + 1
    rng = random.Random(0)
    gold_lines = ewt_dev_lines[:cut]
    system_lines = []
    block = []
    for line in gold_lines + ["\n"]:
        if line.strip():
            block.append(line.rstrip("\n").split("\t"))
            continue
        if block:
            system_lines.extend(perturb_sentence(block, rng))
        block = []
    gold, system = read_treebank(gold_lines), read_treebank(system_lines)
    result = evaluate(gold, system)
    direct = direct_scores(gold, system)
    assert {metric: result[metric].correct for metric in direct} == direct
    assert 0.3 < result["MLAS"].f1 < result["CLAS"].f1 < 1.0 and result["Words"].f1 < 1.0


def perturb_sentence(rows, rng):
    """One sentence with random errors; half its multiword tokens become one word when the tree stays valid."""
    rows = [list(columns) for columns in rows if not columns[0].startswith("#") and "." not in columns[0]]
    words = {columns[0]: columns for columns in rows if columns[0].isdigit()}
    for columns in words.values():
        if columns[6] != "0" and words[columns[6]][6] != "0" and rng.random() < 0.15:
            columns[6] = words[columns[6]][6]  # the grandparent: no cycle
        if rng.random() < 0.1:
            columns[7] = rng.choice(["det", "case", "obj", "nmod", "amod:x", "aux"])
        if rng.random() < 0.1:
            columns[3] = rng.choice(["NOUN", "VERB", "DET"])
        if rng.random() < 0.1:
            columns[5] = "Number=Plur"
        if rng.random() < 0.1:
            columns[2] = columns[2].upper() + "x"
    merged = renumbered(merge_multiword_tokens([list(columns) for columns in rows], rng))
    try:
        read_treebank(merged)
        return merged
    except UDEvalError:
        return renumbered(rows)


def merge_multiword_tokens(rows, rng):
    """Half the multiword tokens as one word: the first word's columns, the others' dependents moved to it."""
    words = {columns[0]: columns for columns in rows if columns[0].isdigit()}
    out, skip_to = [], 0
    for columns in rows:
        if "-" in columns[0] and rng.random() < 0.5:
            first, last = map(int, columns[0].split("-"))
            others = {str(i) for i in range(first + 1, last + 1)}
            head = words[str(first)][6]
            while head in others:
                head = words[head][6]
            for word in words.values():
                if word[6] in others:
                    word[6] = str(first)
            merged = list(words[str(first)])
            merged[1], merged[6] = columns[1], head
            out.append(merged)
            skip_to = last
        elif not (columns[0].isdigit() and int(columns[0]) <= skip_to):
            out.append(columns)
    return out


def renumbered(rows):
    """CoNLL-U lines of the rows, word IDs and heads renumbered 1, 2, ... after merged words."""
    mapping = {"0": "0"}
    for columns in rows:
        if columns[0].isdigit():
            mapping[columns[0]] = str(len(mapping))
    lines = []
    for columns in rows:
        columns = list(columns)
        if "-" in columns[0]:
            columns[0] = "-".join(mapping[part] for part in columns[0].split("-"))
        else:
            columns[0], columns[6] = mapping[columns[0]], mapping[columns[6]]
        lines.append("\t".join(columns) + "\n")
    return lines + ["\n"]


def test_words_f1_follows_the_aligned_pairs_on_random_splits():
    # Random splits of gold tokens into pieces: every unsplit token's word aligns, no split one does.
    rng = np.random.default_rng(0)
    forms = ["alpha", "be", "c", "delta", "epsilon", "f", "gamma"] * 5
    split = rng.random(len(forms)) < 0.4
    gold = conllu("\n".join(f"{i + 1} {f} _ _ _ _ {0 if i == 0 else 1} {'root' if i == 0 else 'dep'}"
                            for i, f in enumerate(forms)))  # fmt: skip
    pieces = [p for f, cut in zip(forms, split) for p in ([f[:1], f[1:]] if cut and len(f) > 1 else [f])]
    system = conllu("\n".join(f"{i + 1} {p} _ _ _ _ {0 if i == 0 else 1} {'root' if i == 0 else 'dep'}"
                              for i, p in enumerate(pieces)))  # fmt: skip
    unsplit = sum(1 for f, cut in zip(forms, split) if not (cut and len(f) > 1))
    assert scores(gold, system)["Words"].correct == unsplit


def test_load_conllu_reads_a_path_with_or_without_a_byte_order_mark(tmp_path):
    path = Path(tmp_path / "a.conllu")
    for encoding in ("utf8", "utf-8-sig"):
        path.write_text("# text = The dog barks.\n" + conllu(DOG), encoding=encoding)
        assert len(load_conllu(path)) == 4
    path.write_bytes(b"1\tcaf\xe9\n")
    with pytest.raises(UDEvalError, match="not UTF-8"):
        load_conllu(path)


def test_error_analysis_sorts_wrong_lemmas_by_kind():
    from spacy_pairatt.evaluation.ud_errors import error_analysis

    system = DOG.replace("1 The   the", "1 The   The").replace("2 dog   dog ", "2 dog   dog ")
    system = system.replace("3 barks bark", "3 barks barks").replace("4 .     .  ", "4 .     x  ")
    gold_bank, system_bank = (
        read_treebank(conllu(text).splitlines(True), name) for text, name in ((DOG, "g"), (system, "s"))
    )
    lemmas = error_analysis(gold_bank, system_bank)["lemmas"]
    # The -> "The" (gold "the"): case; barks -> "barks": the form kept; . -> "x": other. dog is right.
    assert lemmas["scored"] == 4 and lemmas["wrong"] == 3
    assert lemmas["kinds"] == {"case": 1, "form_kept": 1, "other": 1}
    assert {(c["form"], c["gold"], c["system"]) for c in lemmas["commonest"]} == {
        ("The", "the", "The"),
        ("barks", "bark", "barks"),
        (".", ".", "x"),
    }


def test_error_analysis_finds_missed_and_false_sentence_boundaries():
    from spacy_pairatt.evaluation.ud_errors import error_analysis

    home_she_ran = """
    1 home home ADV   RB  _ 0 root
    2 .    .    PUNCT .   _ 1 punct
    3 She  she  PRON  PRP _ 4 nsubj
    4 ran  run  VERB  VBD _ 1 parataxis
    5 .    .    PUNCT .   _ 4 punct
    """
    gold = read_treebank(conllu(HOME, SHE).splitlines(True), "gold")
    system = read_treebank(conllu(HE_WALKED, home_she_ran).splitlines(True), "system")
    bounds = error_analysis(gold, system)["sentence_boundaries"]
    # One boundary each (the end of the text is not one): gold before "She", system before "home".
    assert (bounds["gold"], bounds["system"]) == (1, 1)
    assert bounds["missed"]["count"] == 1 and bounds["missed"]["next_word_capitalised"] == 1
    assert bounds["missed"]["commonest"] == [{"before": ".", "after": "She", "count": 1}]
    assert bounds["false"]["count"] == 1 and bounds["false"]["next_word_capitalised"] == 0
    assert bounds["false"]["commonest"] == [{"before": "walked", "after": "home", "count": 1}]


def test_a_form_with_a_space_inside_a_multiword_token_aligns_as_without_its_spaces():
    """The official script drops spaces (Zs) from every FORM before aligning, so `New York`
    and `New\u00a0York` are the same word inside a multiword token's region."""

    def sentence(space: str) -> str:
        rows = [
            ("1-2", f"New{space}York's", "_", "_", "_"),
            ("1", f"New{space}York", "PROPN", "3", "nmod:poss"),
            ("2", "'s", "PART", "1", "case"),
            ("3", "mayor", "NOUN", "0", "root"),
        ]
        lines = [f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_" for i, form, upos, head, rel in rows]
        return "\n".join(lines) + "\n\n"

    for space in (" ", "\u00a0"):
        result = scores(sentence(" "), sentence(space))
        assert (result["Words"].f1, result["LAS"].f1) == (1.0, 1.0), repr(space)


# Sentences without syntax (a segmenter alone) and sentence errors by kind ----------------------------


def without_syntax(text: str) -> str:
    """The CoNLL-U text with HEAD and DEPREL `_` on every word line."""
    rows = []
    for line in text.splitlines():
        columns = line.split("\t")
        if len(columns) == 10:
            columns[6] = columns[7] = "_"
        rows.append("\t".join(columns))
    return "\n".join(rows) + "\n"


def test_a_file_without_syntax_scores_its_tokens_and_sentences_and_no_heads():
    gold = read_treebank(conllu(HOME, SHE).splitlines(True), "gold")
    system = read_treebank(without_syntax(conllu(HOME, SHE)).splitlines(True), "system")
    result = evaluate(gold, system)
    assert (result["Tokens"].f1, result["Sentences"].f1, result["Words"].f1) == (1.0, 1.0, 1.0)
    # the gold roots (walked, ran) are not found either: a word without syntax has no head at all
    assert (result["UAS"].correct, result["LAS"].correct) == (0, 0)


def test_head_underscore_for_part_of_a_sentence_is_an_error_naming_the_line():
    text = conllu(HOME).replace("1\tHe\the\tPRON\tPRP\t_\t2", "1\tHe\the\tPRON\tPRP\t_\t_")
    with pytest.raises(UDEvalError, match=r"line 1: HEAD `_` for some words of the sentence and a number for others"):
        read_treebank(text.splitlines(True), "system")


@pytest.mark.parametrize(
    "before, after, edge, kind",
    [
        (".", "She", True, "paragraph_edge"),
        (":-)", "Posted", False, "emoticon_or_url"),
        ("http://www.example.com", "Then", False, "emoticon_or_url"),
        ("nina@example.org", "PS", False, "emoticon_or_url"),
        ('"', "He", False, "quote_or_bracket"),
        (".", ")", False, "quote_or_bracket"),
        ("Mr.", "Smith", False, "abbreviation"),
        ("U.S.", "The", False, "abbreviation"),
        (":", "Do", False, "list_or_heading"),
        ("items", "2.", False, "list_or_heading"),
        ("Sincerely", "Traci", False, "no_final_punctuation"),
        (".", "?", False, "other"),
        ("!", "We", False, "other"),
    ],
)
def test_boundary_kinds(before, after, edge, kind):
    from spacy_pairatt.evaluation.ud_errors import boundary_kind

    assert boundary_kind(before, after, edge) == kind


def test_sentence_errors_by_kind_on_ewt_dev_against_its_own_sentences_merged_by_paragraph(ewt_dev_lines, tmp_path):
    """A system that keeps every paragraph as one sentence misses exactly the gold boundaries
    inside paragraphs, none at a paragraph edge, and makes no false ones."""
    from spacy_pairatt.corpora.ud_documents import paragraph_starts, read_ud_documents

    blocks = "".join(ewt_dev_lines).strip().split("\n\n")
    starts = set(paragraph_starts(read_ud_documents(ewt_dev_lines)))
    merged, offset = [], 0
    for number, block in enumerate(blocks):
        rows = [line.split("\t") for line in block.splitlines() if not line.startswith("#")]
        if number in starts:
            merged.append([])
            offset = 0
        for row in rows:
            if "." in row[0]:
                continue
            first, _, last = row[0].partition("-")
            row[0] = f"{int(first) + offset}" + (f"-{int(last) + offset}" if last else "")
            row[6], row[7] = "_", "_"
            merged[-1].append("\t".join(row))
        offset += sum(1 for row in rows if row[0].isdigit())
    system = tmp_path / "paragraphs.conllu"
    system.write_text("".join("\n".join(rows) + "\n\n" for rows in merged), encoding="utf8")
    markdown = tmp_path / "errors.md"
    main(
        ["ud-eval", str(EWT_DEV), str(system), "--sentence-errors", str(markdown), "--output", str(tmp_path / "s.json")]
    )
    text = markdown.read_text(encoding="utf8")
    inside = 2001 - len(starts)
    assert f"missed {inside}, false 0" in text
    assert "| paragraph_edge | 0 | 0 |" in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "kind" not in line]
    assert sum(int(row[1]) for row in rows) == inside
    assert "## Missed boundaries" in text and "- no_final_punctuation: `" in text


def test_ud_table_tabulates_ud_eval_results_and_refuses_what_is_not_one(tmp_path):
    gold = tmp_path / "gold.conllu"
    gold.write_text(conllu(HOME, SHE), encoding="utf8")
    main(["ud-eval", str(gold), str(gold), "--output", str(tmp_path / "same.json")])
    main(
        [
            "ud-table",
            f"itself:{tmp_path / 'same.json'}",
            "--metrics",
            "Sentences",
            "LAS",
            "--output",
            str(tmp_path / "t.md"),
        ]
    )
    table = (tmp_path / "t.md").read_text(encoding="utf8")
    assert "| itself | `gold.conllu` | 100.00 | 100.00 |" in table
    with pytest.raises(SystemExit, match="ud-table: error: 'no-colon' is not NAME:PATH"):
        main(["ud-table", "no-colon"])
    with pytest.raises(SystemExit, match="ud-table: error: .*gold.conllu is not an ud-eval --output file"):
        main(["ud-table", f"x:{gold}"])
    with pytest.raises(SystemExit, match="ud-table: error: no metric Speed"):
        main(["ud-table", f"itself:{tmp_path / 'same.json'}", "--metrics", "Speed"])
