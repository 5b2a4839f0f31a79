"""What the project publishes, written from results/: the generated blocks of README.md and docs/*.md,
the model card, and the assembled pipeline that `spacy package` turns into the en_pairatt wheel."""
