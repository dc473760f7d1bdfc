"""Pure step-text comparisons (no torch): Levenshtein ratio, whitespace normalisation, formulas.

They sit at the bottom of the package, beside ``equiv.data``, because every layer asks them:
the ``formula`` and ``levenshtein`` pruning strategies, the model judge's prefilter, and the
``hybrid`` judge's rule features, which are computed both when it is fitted (``judge``) and when
it prunes (``prune``).
"""
