"""The names a judge export stores its settings under: one owner, no torch.

An exported judge is a Hugging Face directory whose ``config.json`` carries equiv's settings in
one block (``equiv``): the training-time settings, the decision policy and, for an ensemble, its
member list (``equiv.members``). The exporter (:mod:`.export`), the ensemble builder and the pruning-side loader
(:mod:`equiv.prune.loading`, which must read them before torch loads) all use these names.
"""

from __future__ import annotations

SETTINGS_KEY = "equiv"
"""The ``config.json`` block holding equiv's settings."""
MEMBERS_KEY = "members"
"""``equiv.members``: an ensemble's other members, relative to the export (:mod:`equiv.judge.ensemble`)."""
METRICS_FILE = "equiv_metrics.json"
"""The export's validation metrics, beside ``config.json``."""
REMOVED_SETTINGS = {
    "mark_differences": "the marked-differences input form",
    "hybrid": "the hybrid combiner",
    "with_question": "the question as judge input",
}
"""``equiv`` settings of levers removed in 2026-11 (docs/experiments/2026-11-27-removed-levers.md)
that change what the judge's scores are (its input form, or a combiner over the classifier's
logit), so an export that turns one on cannot decide as it was calibrated to: setting -> what it was. Exports that store one switched off load as before."""
