"""equiv: EquivPruner in PyTorch Lightning.

Train a judge that says whether two math reasoning steps are equivalent (``equiv.judge``), refine
its training data by EM between epochs, and use it to prune equivalent siblings during LLM tree
search (``equiv.prune``, ``equiv.search``).
"""

__version__ = "0.1.0"
