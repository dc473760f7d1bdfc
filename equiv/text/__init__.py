"""Pure step-text comparisons (no torch): normalisation, Levenshtein ratio, formulas, the claim guard.

They sit at the bottom of the package, beside ``equiv.data``, because every layer asks them:
the ``formula`` and ``levenshtein`` pruning strategies, the model judge's prefilter, the claim
guard's named rules (:mod:`equiv.text.guard`) and the statement floor's predicate, and the
``hybrid`` judge's rule features, which are computed both when it is fitted (``judge``) and when
it prunes (``prune``). How a number or a word is read has one owner, :mod:`equiv.text.normalize`.
"""
