"""Labelling step pairs with an LLM, the MathEquiv way, and measuring agreement between labellers.

``prompt`` (the five-level template and its few-shot examples), ``parse`` (the answer dictionary),
``client`` (one chat request through the official ``openai`` client, structured output where the
server offers it), ``run`` (a resumable, bounded labelling run), ``agreement`` (two labellers
compared: level and binary agreement, Cohen's kappa, the disagreements), ``cli``
(``search_cli.py label`` and ``search_cli.py agreement``). Guide: docs/judge-data.md.
"""
