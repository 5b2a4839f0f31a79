"""`python -m spacy_pairatt ud-tokenize / tokenizer-eval`: tokenisation alone, scored the CoNLL 2018
way (docs/ud_pipeline.md#tokenisation); thin wrappers over `tokenizer_eval`, registered by `add_commands`."""

import argparse


def one_line_error(args, error: Exception) -> SystemExit:
    return SystemExit(f"python -m spacy_pairatt {args.command}: error: {' '.join(str(error).split())}")


def ud_tokenize(args) -> None:
    from ..evaluation.tokenizer_eval import tokenize_file
    from ..parse_files.errors import ParseCommandError

    try:
        tokenize_file(args.tokenizer, args.input, args.output)
    except (ValueError, ImportError, ParseCommandError) as error:
        raise one_line_error(args, error) from error


def tokenizer_eval(args) -> None:
    from ..evaluation.tokenizer_eval import evaluate_tokenizers, write_tokenizer_results
    from ..reporting.tables import tokenizer_tables

    splits = {name: path for name, path in (("train", args.train), ("dev", args.dev), ("test", args.test)) if path}
    try:
        result = evaluate_tokenizers(splits, args.config)
    except (ValueError, ImportError) as error:
        raise one_line_error(args, error) from error
    write_tokenizer_results(result, args.output_json, args.output_md)
    print(tokenizer_tables(result))


def add_commands(commands: argparse._SubParsersAction) -> None:
    tokenize = commands.add_parser(
        "ud-tokenize", help="tokenize raw text (one document a line) into CoNLL-U for ud-eval's Tokens and Words"
    )
    tokenize.add_argument("tokenizer", help="blank:LANG (spaCy's tokenizer) or a config file (its [nlp.tokenizer])")
    tokenize.add_argument("input", help="text file, one document a line (ud-text writes one), or - for stdin")
    tokenize.add_argument("--output", help="CoNLL-U file to write (default: stdout)")
    tokenize.set_defaults(func=ud_tokenize, records_provenance=False)
    evaluation = commands.add_parser(
        "tokenizer-eval", help="spaCy's English tokenizer against a config's, Tokens and Words F1 on UD treebanks"
    )
    evaluation.add_argument("--train", required=True, help="gold .conllu the rules were learned on")
    evaluation.add_argument("--dev", required=True, help="gold .conllu the rules were checked on")
    evaluation.add_argument("--test", help="gold .conllu scored once, without rule effects or disagreements")
    evaluation.add_argument("--config", required=True, help="config whose [nlp.tokenizer] is compared with spaCy's")
    evaluation.add_argument("--output-json", required=True, help="results JSON (with provenance)")
    evaluation.add_argument("--output-md", help="markdown report: tables and the most frequent disagreements")
    evaluation.set_defaults(func=tokenizer_eval)
