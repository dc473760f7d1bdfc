"""llm-reasoners: merge equivalent candidate actions before any of its algorithms expands them.

Every llm-reasoners algorithm (MCTS, beam search, DFS, greedy) asks its ``SearchConfig`` for a
state's candidate actions through ``get_actions``; :class:`MergingSearchConfig` wraps that one
hook: the candidates are grouped by an equiv judge (its ``group``,
:func:`equiv.prune.boundary.group_families`: the one place a merge is decided, which search and
the service call too) and only each class's representative is returned, so an equivalent
sibling is never stepped into, rewarded or expanded. Everything else is the wrapped config's.

    judge = load_equiv_judge(model="outputs/demo/judge")        # or url="http://127.0.0.1:8000"
    config = MergingSearchConfig(MySearchConfig(...), judge)
    result = MCTS(n_iters=10, depth_limit=4)(world_model, config)

Needs the [reasoners] extra (``llm-reasoners==1.0.2``).
"""

from __future__ import annotations

from typing import Any, Callable

from reasoners import SearchConfig

from equiv.prune.boundary import Family, SiblingJudge
from equiv.prune.strategies import PrunerConfig, build_judge


def load_equiv_judge(*, model: str | None = None, url: str | None = None, device: str = "auto") -> SiblingJudge:
    """A local exported judge (``model``) or a served one (``url``: ``search_cli.py serve``)."""
    if (model is None) == (url is None):
        raise ValueError("give exactly one of model (an exported judge) or url (a judge service)")
    config = PrunerConfig(strategy="model", model=model, device=device) if url is None else \
        PrunerConfig(strategy="remote", url=url)
    judge = build_judge(config)
    assert judge is not None
    return judge


def _question_of(example: Any) -> str | None:
    """The problem a state belongs to, as the judge's claim guard reads it (a string example)."""
    return example if isinstance(example, str) else None


class MergingSearchConfig(SearchConfig):
    """``inner``'s search config whose ``get_actions`` keeps one action per equivalence class.

    ``action_text`` turns an action into the step text the judge compares (default ``str``);
    ``question`` turns the config's ``example`` into the problem text (default: the example when
    it is a string). ``merged`` counts the actions dropped, ``asked`` the ``get_actions`` calls.
    """

    def __init__(self, inner: SearchConfig, judge: SiblingJudge, *, action_text: Callable[[Any], str] = str,
                 question: Callable[[Any], str | None] = _question_of, mode: str = "greedy") -> None:
        super().__init__()
        self.inner = inner
        self.judge = judge
        self.action_text = action_text
        self.question = question
        self.mode = mode
        self.merged = 0
        self.asked = 0

    def get_actions(self, state: Any) -> list[Any]:
        actions = list(self.inner.get_actions(state))
        self.asked += 1
        if len(actions) < 2:
            return actions
        family = Family.of([self.action_text(a) for a in actions], self.question(self.inner.example))
        grouping = self.judge.group([family], mode=self.mode)[0].grouping  # type: ignore[arg-type]
        self.merged += len(actions) - len(grouping.representatives)
        return [actions[i] for i in sorted(grouping.representatives)]

    def fast_reward(self, state: Any, action: Any) -> tuple[float, dict]:
        return self.inner.fast_reward(state, action)

    def reward(self, state: Any, action: Any, **kwargs: Any) -> tuple[float, dict]:
        return self.inner.reward(state, action, **kwargs)

    def update_example(self, example: Any, prompt: Any = None) -> None:
        self.inner.update_example(example, prompt)
        super().update_example(example, prompt)

    def __getattr__(self, name: str) -> Any:
        # anything else the algorithm or the user's code reads is the wrapped config's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
