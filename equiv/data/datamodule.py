"""MathEquivDataModule: MathEquiv-format pairs -> length-grouped, dynamically padded batches.

Design points (why, not just what):

* Sources are local JSON/JSONL files, local dataset folders or hub ids, read by
  :func:`equiv.data.records.load_pair_records`, so the demo, the GSM8K recipe and the paper's
  MathEquiv recipe share one code path.
* The level -> label mapping drops level 2 (by default) *before* training and evaluation; the
  label of a sample is always ``label_mapping.label(record.result)``.
* EM refinement (``equiv.judge.em_callback``) replaces the training samples between epochs through
  :meth:`MathEquivDataModule.set_train_records`; ``train_dataloader()`` is a pure function of that
  state and the current epoch, so with ``reload_dataloaders_every_n_epochs: 1`` the next epoch sees
  the refined samples and a resumed run rebuilds the same loader.
* Batches are grouped by length (shuffled "mega-batches" sorted by length, then batches shuffled)
  and padded per batch -- to a multiple of the attention window for Longformer -- so short steps
  are not padded to the longest step of the corpus. The sampler is a plain ``Sampler``; under DDP
  Lightning wraps it in its distributed wrapper.
"""

from __future__ import annotations

import hashlib
import random
import sys
from typing import Any, Iterator, Sequence

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from equiv.backbones import BUNDLED_MINILM, resolve_model_name
from equiv.data.records import (DEFAULT_MAX_CHARS, LabelMapping, PairRecord, load_pair_records, problem_key,
                                question_of)
from equiv.errors import InputError, check_fraction
from equiv.data.tokenize import canonical_pair, pad_multiple_for, tokenize_pairs


class PairDataset(Dataset):
    """Records with their binary labels (``None`` when the level is dropped: predict only)."""

    def __init__(self, records: Sequence[PairRecord], labels: Sequence[int | None]) -> None:
        self.records = list(records)
        self.labels = list(labels)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict[str, Any]:
        rec = self.records[index]
        return {"index": index, "sentence1": rec.sentence1, "sentence2": rec.sentence2, "label": self.labels[index]}


class PairCollator:
    """Tokenise a list of samples as one batch: longer side truncated first, padded per batch.
    ``canonical``: each pair as the shipped judge scores it -- in its canonical order
    (:func:`equiv.data.tokenize.canonical_pair`) and without thousands commas
    (:func:`equiv.data.tokenize.tokenize_pairs`' ``scored``) -- the evaluation loaders'; training
    batches keep the file's order and text."""

    def __init__(self, tokenizer: Any, max_length: int, pad_to_multiple_of: int | None,
                 canonical: bool = False) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.pad_to_multiple_of = pad_to_multiple_of
        self.canonical = canonical

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        pairs = [(s["sentence1"], s["sentence2"]) for s in samples]
        batch = dict(
            tokenize_pairs(
                self.tokenizer,
                [canonical_pair(a, b) for a, b in pairs] if self.canonical else pairs,
                max_length=self.max_length,
                pad_to_multiple_of=self.pad_to_multiple_of,
                scored=self.canonical,
            )
        )
        batch["index"] = torch.tensor([s["index"] for s in samples], dtype=torch.long)
        if all(s["label"] is not None for s in samples):
            batch["labels"] = torch.tensor([s["label"] for s in samples], dtype=torch.long)
        return batch


def length_grouped_order(
    lengths: Sequence[int], batch_size: int, *, seed: int, mega_batch_factor: int = 50
) -> list[int]:
    """A shuffled order in which each run of ``batch_size`` indices has similar lengths.

    Indices are shuffled, cut into mega-batches of ``batch_size * mega_batch_factor``, each sorted
    by length (longest first), cut into batches, and the batches shuffled again -- so the order is
    random from epoch to epoch while padding stays small. Pure function of its arguments.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = max(batch_size * mega_batch_factor, batch_size)
    batches: list[list[int]] = []
    for start in range(0, len(order), mega):
        chunk = sorted(order[start : start + mega], key=lambda i: -lengths[i])
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return [i for b in batches for i in b]


class FixedOrderSampler(Sampler[int]):
    """A given order, unchanged (evaluation: longest first, so batches pad little)."""

    def __init__(self, order: Sequence[int]) -> None:
        self.order = list(order)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)


class LengthGroupedSampler(Sampler[int]):
    """Yields :func:`length_grouped_order` for the current epoch (``set_epoch`` is honoured)."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, epoch: int = 0) -> None:
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        return iter(length_grouped_order(self.lengths, self.batch_size, seed=self.seed * 100_003 + self.epoch))


SPLITS = ("train", "val", "test", "predict")


def split_by_problem(records: Sequence[PairRecord], fraction: float) -> tuple[list[PairRecord], list[PairRecord]]:
    """``(kept, held_out)``: about ``fraction`` of the problems go to ``held_out``.

    Membership is a hash of the problem key, not a random draw, so the split is the same for every
    seed, machine and ordering of the files -- seeds vary the model, never the calibration data.
    """
    kept: list[PairRecord] = []
    held: list[PairRecord] = []
    for record in records:
        (held if problem_bucket(record) < fraction else kept).append(record)
    return kept, held


def problem_bucket(record: PairRecord, salt: str = "") -> float:
    """Where the record's problem falls in [0, 1): a hash of ``salt`` + its problem key, the same
    on every machine, seed and file order. Different salts give independent draws."""
    digest = hashlib.sha1((salt + problem_key(record)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def keep_problems(records: Sequence[PairRecord], fraction: float) -> list[PairRecord]:
    """The records of about ``fraction`` of the problems (all their pairs, or none of them).

    For learning curves: which data would more labelled pairs buy? Membership is a hash of the
    problem key salted apart from :func:`split_by_problem`'s (so it does not lean on the
    calibration buckets), the same for every seed, and nested: the problems kept at 0.5 are all
    kept at 0.75.
    """
    if fraction >= 1.0:
        return list(records)
    return [record for record in records if problem_bucket(record, "train_fraction:") < fraction]


class MathEquivDataModule(L.LightningDataModule):
    """Loads MathEquiv-format pairs for the judge and serves tokenised batches.

    Args:
        train: training data -- a JSON/JSONL file, a folder with ``<split>.jsonl``, or a hub id.
        val: validation data (same forms). Needed by ``fit`` (the best checkpoint is chosen on it).
        test: test data for ``test``.
        predict: data to score with ``predict`` (every level kept; labels are not needed).
        train_split: split name for folders and hub datasets (ignored for a file).
        val_split: see ``train_split``.
        test_split: see ``train_split``.
        predict_split: see ``train_split``.
        hub_config: dataset config for hub sources; ``"{split}"`` uses the split name
            (MathEquiv keeps each split in a config of that name).
        model_name: backbone whose tokenizer is used (linked from the model by the CLI).
        max_length: tokens per pair; the longer side is truncated first (linked from the model).
        batch_size: training batch size (the paper: 4).
        eval_batch_size: batch size for validation/test/predict (default: ``batch_size``).
        label_equivalent: MathEquiv levels mapped to "equivalent" (label 1).
        label_not_equivalent: levels mapped to "not equivalent" (label 0); others are dropped.
        skip_invalid: leave out malformed records instead of stopping; a summary is printed.
        max_chars: records with a sentence longer than this are invalid.
        group_by_length: batch training samples of similar length together.
        pad_to_multiple_of: pad each batch to a multiple of this; ``None`` = the model's attention
            window where it has one (Longformer), else no rounding.
        num_workers: DataLoader workers.
        seed: seed of the length-grouped shuffle (combined with the epoch).
        train_more: further training files (same forms as ``train``), appended to ``train`` --
            e.g. ``train_more.jsonl`` of gsm8k_equiv.
        calibration_fraction: hold out this fraction of the training *problems* (records grouped
            by :func:`problem_key`, so no problem is in two splits) as the validation split. The
            best epoch and the judge's decision threshold are then chosen on data the model was
            not trained on, and a separate held-out file (``valid.jsonl``) stays an untouched
            estimate. Needs ``val`` unset.
        train_fraction: train on the pairs of only this fraction of the training problems
            (:func:`keep_problems`; after the calibration split, which stays whole): a learning
            curve's point -- how much would more labelled data buy? 1 keeps them all.
    """

    def __init__(
        self,
        train: str | None = None,
        val: str | None = None,
        test: str | None = None,
        predict: str | None = None,
        train_split: str = "train",
        val_split: str = "valid",
        test_split: str = "test",
        predict_split: str = "test",
        hub_config: str | None = None,
        model_name: str = BUNDLED_MINILM,
        max_length: int = 512,
        batch_size: int = 4,
        eval_batch_size: int | None = None,
        label_equivalent: list[int] = [3, 4],  # noqa: B006 - jsonargparse reads the default
        label_not_equivalent: list[int] = [0, 1],  # noqa: B006
        skip_invalid: bool = False,
        max_chars: int = DEFAULT_MAX_CHARS,
        group_by_length: bool = True,
        pad_to_multiple_of: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        train_more: list[str] | None = None,
        calibration_fraction: float = 0.0,
        train_fraction: float = 1.0,
    ) -> None:
        super().__init__()
        check_fraction(calibration_fraction, "calibration_fraction", closed=False)
        if calibration_fraction > 0 and val is not None:
            raise InputError("give either data.val or data.calibration_fraction, not both", field="calibration_fraction")
        check_fraction(train_fraction, "train_fraction")
        if train_fraction <= 0:
            raise InputError(f"must be above 0, got {train_fraction}", field="train_fraction")
        if batch_size < 1:
            raise InputError(f"must be at least 1, got {batch_size}", field="batch_size")
        if max_length < 8:
            raise InputError(f"must be at least 8, got {max_length}", field="max_length")
        self.save_hyperparameters()
        self.sources = {"train": train, "val": val, "test": test, "predict": predict}
        self.splits = {"train": train_split, "val": val_split, "test": test_split, "predict": predict_split}
        self.hub_config = hub_config
        self.model_name = model_name
        self.max_length = max_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.label_mapping = LabelMapping(tuple(label_equivalent), tuple(label_not_equivalent))
        self.skip_invalid = skip_invalid
        self.max_chars = max_chars
        self.group_by_length = group_by_length
        self.num_workers = num_workers
        self.seed = seed
        self.train_more = list(train_more or [])
        self.calibration_fraction = float(calibration_fraction)
        self.train_fraction = float(train_fraction)
        self._pad_to_multiple_of = pad_to_multiple_of
        self._tokenizer: Any = None
        self._pad_resolved = False
        self.records: dict[str, list[PairRecord]] = {}
        self.original_train_records: list[PairRecord] = []
        self.train_records: list[PairRecord] = []

    # -- tokenizer and padding -------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            path = resolve_model_name(self.model_name)
            try:
                self._tokenizer = AutoTokenizer.from_pretrained(path)
            except (OSError, ValueError) as err:
                raise InputError(f"cannot load tokenizer from {path!r}: {str(err).splitlines()[0]}", field="model_name") from None
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, value: Any) -> None:
        """Let a caller (a test, the EM callback) hand over an already loaded tokenizer."""
        self._tokenizer = value

    @property
    def pad_to_multiple_of(self) -> int | None:
        if not self._pad_resolved:
            if self._pad_to_multiple_of is None:
                from transformers import AutoConfig

                try:
                    config = AutoConfig.from_pretrained(resolve_model_name(self.model_name))
                except (OSError, ValueError):
                    config = None
                self._pad_to_multiple_of = pad_multiple_for(config) if config else None
            self._pad_resolved = True
        return self._pad_to_multiple_of

    def collator(self, canonical: bool = False) -> PairCollator:
        """The batch collator; ``canonical``: pairs as the shipped judge scores them, in its order
        and without thousands commas (the evaluation loaders), else the file's (training)."""
        return PairCollator(self.tokenizer, self.max_length, self.pad_to_multiple_of, canonical)

    # -- loading ---------------------------------------------------------------------------
    def load_split(self, split: str) -> list[PairRecord]:
        """Read and validate one split's records (all levels), printing any skip summary."""
        source = self.sources[split]
        if source is None:
            raise InputError(f"no data given for the {split} split (set data.{split})", field=f"data.{split}")
        records, report = load_pair_records(
            source,
            split=self.splits[split],
            name=self.hub_config,
            skip_invalid=self.skip_invalid,
            max_chars=self.max_chars,
        )
        if self.skip_invalid:
            print(report.summary(source), file=sys.stderr)
        if not records:
            raise InputError(f"no valid records in the {split} data", path=source)
        return records

    def labelled(self, split: str, records: Sequence[PairRecord]) -> list[PairRecord]:
        """Records whose level maps to a label; fails if nothing is left."""
        kept = [r for r in records if self.label_mapping.label(r.result) is not None]
        if not kept:
            raise InputError(
                f"no records left after the label mapping {self.label_mapping.to_dict()} in the {split} data",
                path=self.sources[split],
            )
        return kept

    def labelled_pairs(self, split: str) -> tuple[list[tuple[str, str]], list[int], list[str]]:
        """``(pairs, labels, problem keys)`` of a set-up split (its records are already labelled):
        what the calibration steps after ``fit`` (the threshold, the policy's report) are computed on."""
        kept = [(r, y) for r in self.records.get(split) or [] if (y := self.label_mapping.label(r.result)) is not None]
        return [(r.sentence1, r.sentence2) for r, _ in kept], [int(y) for _, y in kept], [problem_key(r) for r, _ in kept]

    def labelled_questions(self, split: str) -> list[str]:
        """The ``question`` of each pair :meth:`labelled_pairs` returns ("" where a record has none):
        the claim guard reads it for restated givens and the problem's entities."""
        return [question_of(r) for r in self.records.get(split) or []
                if self.label_mapping.label(r.result) is not None]

    def setup(self, stage: str | None = None) -> None:
        wanted = {
            "fit": ("train", "val"),
            "validate": ("val",),
            "test": ("test",),
            "predict": ("predict",),
            None: tuple(s for s in SPLITS if self.sources[s] is not None),
        }[stage]
        if self.calibration_fraction > 0 and ("train" in wanted or "val" in wanted) and "train" not in self.records:
            self._setup_calibration_split()
        for split in wanted:
            if split in self.records:
                continue
            records = self.load_split(split)
            if split == "train":
                records = records + self._load_more()
            self.records[split] = records if split == "predict" else self.labelled(split, records)
        if "train" in wanted and self.train_fraction < 1.0 and not self.original_train_records:
            self.records["train"] = self._kept_train(self.records["train"])
        if "train" in wanted and not self.original_train_records:
            self.original_train_records = list(self.records["train"])
            self.train_records = list(self.original_train_records)

    def _kept_train(self, records: list[PairRecord]) -> list[PairRecord]:
        """``train_fraction`` of the training problems' pairs; refuses to leave none."""
        kept = keep_problems(records, self.train_fraction)
        if not kept:
            raise InputError(f"train_fraction {self.train_fraction} keeps none of the {len(records)} training "
                             "records' problems", field="train_fraction")
        return kept

    def _load_more(self) -> list[PairRecord]:
        records: list[PairRecord] = []
        for source in self.train_more:
            more, report = load_pair_records(
                source, split=self.splits["train"], name=self.hub_config,
                skip_invalid=self.skip_invalid, max_chars=self.max_chars,
            )
            if self.skip_invalid:
                print(report.summary(source), file=sys.stderr)
            records.extend(more)
        return records

    def _setup_calibration_split(self) -> None:
        """Split train (+ train_more) by problem into training and calibration (= val) records."""
        records = self.load_split("train") + self._load_more()
        train, calibration = split_by_problem(records, self.calibration_fraction)
        if not train or not calibration:
            raise InputError(
                f"calibration_fraction {self.calibration_fraction} leaves {len(train)} training and "
                f"{len(calibration)} calibration records; both must be non-empty",
                path=self.sources["train"],
            )
        self.records["train"] = self.labelled("train", train)
        self.records["val"] = self.labelled("val", calibration)

    def set_train_records(self, records: Sequence[PairRecord]) -> None:
        """Replace the training samples; the NEXT ``train_dataloader()`` call serves these."""
        if not records:
            raise ValueError("set_train_records needs at least one record")
        self.train_records = list(records)

    # -- loaders ---------------------------------------------------------------------------
    def _dataset(self, records: Sequence[PairRecord], *, labelled: bool) -> PairDataset:
        labels = [self.label_mapping.label(r.result) if labelled else None for r in records]
        return PairDataset(records, labels)

    def _current_epoch(self) -> int:
        trainer = getattr(self, "trainer", None)
        return int(trainer.current_epoch) if trainer is not None else 0

    def served_train_records(self) -> list[PairRecord]:
        """The samples an epoch trains on: ``train_records`` (EM may have rewritten them)."""
        return list(self.train_records)

    def train_dataloader(self) -> DataLoader:
        if not self.train_records:
            self.setup("fit")
        served = self.served_train_records()
        dataset = self._dataset(served, labelled=True)
        epoch = self._current_epoch()
        if self.group_by_length:
            # Characters are a close proxy for tokens within one corpus and cost nothing to
            # recompute when EM rewrites the samples.
            lengths = [len(r.sentence1) + len(r.sentence2) for r in served]
            sampler: Sampler[int] = LengthGroupedSampler(lengths, self.batch_size, seed=self.seed, epoch=epoch)
        else:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            sampler = torch.utils.data.RandomSampler(dataset, generator=generator)
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            collate_fn=self.collator(),
            num_workers=self.num_workers,
        )

    def _eval_loader(self, split: str) -> DataLoader:
        if split not in self.records:
            self.setup({"val": "validate", "test": "test", "predict": "predict"}[split])
        records = self.records[split]
        labelled = split != "predict" or all(self.label_mapping.label(r.result) is not None for r in records)
        dataset = self._dataset(records, labelled=labelled)
        order = sorted(range(len(records)), key=lambda i: -(len(records[i].sentence1) + len(records[i].sentence2)))
        return DataLoader(
            dataset,
            batch_size=self.eval_batch_size,
            sampler=FixedOrderSampler(order),
            collate_fn=self.collator(canonical=True),  # validation, test, predict: as the judge scores
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._eval_loader("predict")
