"""Export an *untuned* judge: the pretrained encoder with a seeded, untrained classification head.

The paper's pruner ablation (Figure 3) runs MCTS with three judges: the untuned encoder, the
judge fine-tuned without EM, and the judge fine-tuned with EM. Search only loads exported judges
(:func:`equiv.prune.loading.load_classifier` refuses a bare encoder, so a typo never silently
prunes with a random head); this writes the untuned one *on purpose*, in the same exported format,
with the same settings a trained judge carries (label mapping, prefilter 0.75, threshold 0.5)::

    python -m equiv.judge.untuned --model allenai/longformer-base-4096 --out runs/judge/untuned

Its decisions are those of a random linear head on the pretrained encoder: the ablation's point.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import command_parser, parse_or_refuse
from equiv.errors import exit_on_input_error, output_directory_kind


def export_untuned(model_name: str, out_dir: str | Path, *, seed: int = 0, max_length: int = 512) -> Path:
    """Build a :class:`PairClassifier` around ``model_name`` (head seeded by ``seed``) and export it."""
    import torch

    from equiv.judge.export import export_judge
    from equiv.judge.module import PairClassifier

    torch.manual_seed(seed)
    module = PairClassifier(model_name=model_name, max_length=max_length)
    return export_judge(module, out_dir)


def build_parser() -> Any:
    """The command's parser (jsonargparse through :func:`equiv.cliargs.command_parser`): the same
    ``--help`` layout and one-line errors as every command, and ``--config`` for a YAML file of
    these options."""
    parser = command_parser("python -m equiv.judge.untuned", __doc__.split("\n\n")[0])
    parser.add_argument("--model", default="allenai/longformer-base-4096", help="encoder hub id or local directory")
    parser.add_argument("--out", required=True, help="directory to write the judge to")
    parser.add_argument("--seed", type=int, default=0, help="seed of the classification head")
    parser.add_argument("--max_length", type=int, default=512, help="token limit per pair stored with the judge")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv)  # a bad option: one line, exit 2
    with exit_on_input_error():
        output_directory_kind(args.out)  # the one output rule, before the encoder loads
        out = export_untuned(args.model, args.out, seed=args.seed, max_length=args.max_length)
    print(f"untuned judge ({args.model}, head seed {args.seed}) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
