"""The report in a real browser: headless Chromium loads the page, runs its script, and we check
the screenshot is not blank and the tree for one problem is in the DOM with merged nodes marked.

Needs the Debian package ``chromium`` (``apt-get install -y chromium``; .ci/run installs it);
skips with that instruction when it is missing.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from equiv.report.build import build_report
from tests.helpers.runs import NASTY, runner_runs, write_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install -y chromium)"
)

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(*args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def dump_dom(url: str) -> str:
    res = chromium("--dump-dom", url)
    assert res.returncode == 0 and "<html" in res.stdout, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    runs = runner_runs(root / "runs", ("mcts",))
    build_report(runs, root / "report")
    return root / "report"


def test_screenshot_is_not_blank(report_dir: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    res = chromium(f"--screenshot={shot}", "--window-size=1280,2000", (report_dir / "index.html").as_uri())
    assert shot.exists(), res.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels.std() > 0.05, "screenshot is (nearly) one colour"
    colours = {tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 50, f"only {len(colours)} distinct colours: the page did not render"


def test_tree_with_merged_nodes_is_in_the_dom(report_dir: Path) -> None:
    dom = dump_dom((report_dir / "index.html").as_uri())
    root = re.search(r'<ul class="tree" id="tree-root" data-problem="([^"]+)" data-run="(\d+)"', dom)
    assert root, "the script did not render a tree"
    assert root.group(2) == "1", "the viewer starts on the pruned run"
    nodes = re.findall(r'<li class="node([^"]*)"([^>]*)>', dom)
    assert len(nodes) >= 5
    merged = [attrs for cls, attrs in nodes if " merged" in cls]
    assert merged, "no merged node marked in the DOM"
    assert all("data-merged-into=" in attrs for attrs in merged)
    judged = [attrs for cls, attrs in nodes if " merged" in cls and "duplicate" not in cls]
    assert judged, "no merge by the judge (only exact duplicates) in the first tree"
    assert any("data-judge-prob=" in attrs for attrs in judged)
    assert sum(" on-path" in cls for cls, _ in nodes) >= 2, "chosen path not highlighted"
    assert 'class="merged-group"' in dom


def test_hash_selects_problem_and_text_stays_text(tmp_path: Path) -> None:
    runs = [write_run(tmp_path / "base", pruned=False), write_run(tmp_path / "pruned", pruned=True)]
    build_report(runs, tmp_path / "report")
    dom = dump_dom((tmp_path / "report" / "index.html").as_uri() + "#run=1&problem=7")
    assert re.search(r'id="tree-root" data-problem="7" data-run="1"', dom)
    assert "<b>bold</b>" not in dom, "step text was parsed as HTML"
    assert html.escape(NASTY, quote=False) in dom
    assert re.search(r'class="node merged"[^>]*data-merged-into="1"[^>]*data-judge-prob="0.81"', dom)


def test_collapsed_subtrees_are_built_on_demand(tmp_path: Path) -> None:
    runs = [write_run(tmp_path / "base", pruned=False), write_run(tmp_path / "pruned", pruned=True)]
    build_report(runs, tmp_path / "report", collapse_depth=1)
    dom = dump_dom((tmp_path / "report" / "index.html").as_uri() + "#run=0&problem=7")
    assert re.search(r'id="tree-root" data-problem="7" data-run="0"', dom)
    # Node 2 (depth 1, off the chosen path) starts collapsed and its child 6 is not built yet;
    # node 1 is on the path, so its children are there.
    assert re.search(r'<li class="node collapsed" data-node-id="2"', dom)
    assert 'data-node-id="6"' not in dom and 'data-node-id="4"' in dom
