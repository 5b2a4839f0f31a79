"""spaCy pipeline components: the factories a pipeline's config names, the scorers their configs name
(scoring), and what creating one sets for the whole process (memory, forking)."""
