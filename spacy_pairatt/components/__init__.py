"""spaCy pipeline components: the factories a pipeline's config names, the scorers their configs name
(scoring), the tokenizer a config can name (tokenizer), and what creating a component sets for the
whole process (forking), and the heap bound that training configs ask for (memory)."""
