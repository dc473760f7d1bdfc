"""What the package declares against what the code uses (no GPU or hub needed to check these)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_transformers_floor_is_the_api_the_code_uses():
    """from_pretrained(dtype=...) and DynamicCache(ddp_cache_data=..., config=...) are the 5.x
    API; a 4.x floor would let pip install a transformers the code cannot run on."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"transformers\b", d)]
    floor = re.search(r">=\s*([0-9.]+)", spec).group(1)
    assert tuple(int(x) for x in floor.split(".")[:2]) >= (5, 0), spec
    sources = "\n".join(p.read_text() for p in (REPO / "equiv").rglob("*.py"))
    assert "DynamicCache(ddp_cache_data=" in sources and "from_pretrained(" in sources


def test_no_vllm_option_suggested_that_vllm_032_refuses():
    """vLLM 0.32's LLM() no longer takes swap_space; nothing the user reads may suggest it."""
    from equiv.search.policies import PolicyConfig
    import inspect

    texts = [p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "configs").rglob("*.yaml"))]]
    texts.append(inspect.getsource(PolicyConfig))
    assert not [t for t in texts if "swap_space" in t]
