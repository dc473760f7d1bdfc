"""Pure step-text comparisons (no torch): normalisation, Levenshtein ratio, formulas, the claim guard.

They sit at the bottom of the package, beside ``equiv.data``, because every layer asks them:
the ``formula`` and ``levenshtein`` pruning strategies, the model judge's prefilter, the claim
guard's named rules (:mod:`equiv.text.guard`) and the statement floor's predicate. How a number or a word is read has one owner, :mod:`equiv.text.normalize`.
"""
