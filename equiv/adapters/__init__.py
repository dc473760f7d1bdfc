"""Other search frameworks pruned by an equiv judge (local or served): ``llm_reasoners``."""
