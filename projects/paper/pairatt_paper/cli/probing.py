"""probe, visualize: what a frozen encoder's pair features know about arcs, and the pictures
(`pairatt_paper.probing`, `pairatt_paper.visualize`)."""

from pathlib import Path


def probe(args) -> None:
    """Probe a frozen encoder's pair features for dependency arcs (see docs/probing.md)."""
    from spacy_pairatt.reporting.provenance import command_as_typed

    from ..probe_report import write_probe_report
    from ..probing import run_probe

    try:
        result = run_probe(
            Path(args.train),
            Path(args.eval),
            args.encoder,
            args.max_sentences or None,
            args.max_eval_sentences or None,
            args.negatives_per_word,
            args.seed,
            args.rounds,
            args.threads,
        )
        if args.importance_png:
            from ..visualize import plot_attention_gain

            plot_attention_gain(result["probes"]["both"]["importance"], Path(args.importance_png))
    except (ImportError, ValueError, FileNotFoundError) as error:
        raise SystemExit(f"python -m pairatt_paper probe: error: {error}") from error
    print(write_probe_report(result, args.output_json, args.output_md, command_as_typed(), args.importance_png))


def visualize(args) -> None:
    """attention / relation maps, a displaCy parse, or training curves (see docs/probing.md)."""
    from spacy_pairatt.reporting.json_files import write_text
    from spacy_pairatt.reporting.provenance import command_as_typed

    from .. import visualize as pictures
    from ..probe_report import PICTURE_BLOCKS

    output = Path(args.output)
    try:
        if args.mode in PICTURE_BLOCKS.values():
            maps = pictures.maps_from_probe(Path(args.probe)) if args.probe else pictures.parse_map_specs(args.maps)
            if args.mode == "attention":
                pictures.attention_picture(Path(args.conllu), args.sentence_index, maps, output, args.encoder)
                source = f"sentence {args.sentence_index} of {Path(args.conllu).name}"
            else:
                tagged = args.text or pictures.semeval_sentence(Path(args.semeval), args.id)
                pictures.relation_picture(tagged, maps, output, args.encoder)
                source = f"SemEval sentence {args.id}" if args.id else "the given sentence"
            if args.report:
                marker = {mode: marker for marker, mode in PICTURE_BLOCKS.items()}[args.mode]
                caption = pictures.picture_caption(args.mode, maps, source)
                pictures.report_picture(Path(args.report), marker, output, caption, command_as_typed())
        elif args.mode == "parse":
            markup = pictures.displacy_markup(pictures.load_parser(args.model), args.text, page=output.suffix != ".svg")
            write_text(output, markup)
        else:
            log = Path(args.log)
            pictures.plot_training_curves(pictures.parse_training_log(log.read_text(encoding="utf8")), output, log.name)
    except (ImportError, ValueError, FileNotFoundError) as error:
        raise SystemExit(f"python -m pairatt_paper visualize {args.mode}: error: {error}") from error
    print(f"Saved {output}")


def add_commands(commands) -> None:
    """Its commands on the `python -m pairatt_paper` subparsers."""
    probing = commands.add_parser("probe", help="how well a frozen encoder's pair features find dependency arcs")
    probing.add_argument("train", help=".conllu the probes are fitted on")
    probing.add_argument("eval", help=".conllu the probes are scored on")
    probing.add_argument("--encoder", help="local Hugging Face model directory (default: all-MiniLM-L6-v2)")
    probing.add_argument("--max-sentences", type=int, default=1500, help="train sentences, 0: all (default: 1500)")
    probing.add_argument("--max-eval-sentences", type=int, default=300, help="eval sentences, 0: all (default: 300)")
    probing.add_argument("--negatives-per-word", type=int, default=3, help="sampled non-arcs per word (default: 3)")
    probing.add_argument("--seed", type=int, default=0, help="negative sampling and LightGBM seed (default: 0)")
    probing.add_argument("--rounds", type=int, default=100, help="boosting rounds per probe (default: 100)")
    probing.add_argument("--threads", type=int, default=0, help="LightGBM threads, 0: its default (default: 0)")
    probing.add_argument("--output-json", default="results/probe.json", help="(default: results/probe.json)")
    probing.add_argument("--output-md", default="results/probe.md", help="(default: results/probe.md)")
    probing.add_argument("--importance-png", help="PNG of the combined probe's gain per layer and head")
    probing.set_defaults(func=probe)
    pictures = commands.add_parser("visualize", help="attention maps, displaCy parses, training curves as pictures")
    modes = pictures.add_subparsers(dest="mode", required=True)
    for mode, what in (
        ("attention", "attention maps of a CoNLL-U sentence, gold arcs boxed (the paper's Fig. 3)"),
        ("relation", "attention maps of a SemEval sentence, entities marked (the paper's Fig. 4)"),
    ):
        maps = modes.add_parser(mode, help=what)
        if mode == "attention":
            maps.add_argument("conllu", help=".conllu file")
            maps.add_argument("--sentence-index", type=int, default=0, help="0-based sentence in the file")
        else:
            source = maps.add_mutually_exclusive_group(required=True)
            source.add_argument("--text", help="a sentence with <e1>..</e1> and <e2>..</e2>")
            source.add_argument("--semeval", help="SemEval-2010 Task 8 file (TRAIN_FILE.TXT, TEST_FILE_FULL.TXT)")
            maps.add_argument("--id", help="sentence id in the --semeval file")
        which = maps.add_mutually_exclusive_group(required=True)
        which.add_argument("--probe", help="probe results JSON: its two most important attention heads")
        which.add_argument("--maps", help="LAYER:HEAD[:a_ij|a_ji],... (1-based), e.g. 3:5,2:1:a_ji")
        maps.add_argument("--encoder", help="local Hugging Face model directory (default: all-MiniLM-L6-v2)")
        maps.add_argument("--output", required=True, help="PNG file")
        maps.add_argument("--report", help="markdown file (results/probe.md) whose picture block gets the PNG")
    parse_picture = modes.add_parser("parse", help="displaCy rendering of a pipeline's parses")
    parse_picture.add_argument("--model", required=True, help="package name or path of a pipeline")
    parse_picture.add_argument("--text", action="append", required=True, help="a text to parse (repeatable)")
    parse_picture.add_argument("--output", required=True, help=".html page, or .svg (one text)")
    curves = modes.add_parser("curves", help="loss and dev scores from a `spacy train` console log")
    curves.add_argument("log", help="the console output of spacy train (e.g. results/train_pairatt.log)")
    curves.add_argument("--output", required=True, help="PNG file")
    pictures.set_defaults(func=visualize)
