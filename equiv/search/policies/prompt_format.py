"""The :class:`PromptFormat` type: one policy's prompt, step-delimiter and final-answer conventions.

Its own module (below :mod:`.prompts`, which holds the registered formats, and
:mod:`.code_format`, which subclasses it), so that neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from equiv.errors import InputError
from equiv.search.policies.fewshot import render_prompt


@dataclass(frozen=True)
class PromptFormat:
    """One policy's prompt conventions (:mod:`equiv.search.policies.prompts` describes each format)."""

    name: str
    step_delimiter: str
    """Stop string that ends one step."""
    step_suffix: str
    """Appended after each step already taken when building the prompt."""
    answer_markers: tuple[str, ...]
    """Text that states the final answer (see ``end_at_answer``)."""
    system_prompt: str | None = None
    end_at_answer: bool = True
    """Does a step stating the final answer end the solution (besides EOS)? Off for Qwen and
    Math-Shepherd's policy, as in the reference: its MATH/GSM8K environments have no stop string
    (``STOP_STR = None``; the ``"The answer is "`` its search configs pass is never read), so a
    solution ends only at EOS, which both models emit right after their answer step. On for
    ``plain`` and ``fewshot`` (base models may never emit EOS)."""
    exemplars: tuple = ()
    """``fewshot``: the solved problems shown before the question (:class:`.fewshot.Exemplar`)."""
    shots: int = 0
    """``fewshot``: how many of ``exemplars`` a prompt shows (one spare replaces the asked question)."""

    def build(self, question: str, steps: Sequence[str], tokenizer: Any | None = None) -> str:
        """The full prompt text for sampling the step after ``steps``."""
        if self.name == "qwen25_math_chat":
            if tokenizer is None or not getattr(tokenizer, "chat_template", None):
                raise InputError(
                    "prompt format 'qwen25_math_chat' needs a tokenizer with a chat template; "
                    "use prompt_format 'plain' or 'mistral_sft' for base models",
                    field="policy.prompt_format",
                )
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": question})
            head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        elif self.name == "mistral_sft":
            head = question.strip() + " "
        elif self.name == "fewshot":
            return render_prompt(self.exemplars, self.shots, question, steps, self.step_suffix)
        else:
            head = question.strip() + "\n\n"
        return head + "".join(step + self.step_suffix for step in steps)

    def clean_step(self, text: str) -> str:
        """A completion as a step: cut at the first delimiter, whitespace stripped."""
        cut = text.find(self.step_delimiter)
        if cut >= 0:
            text = text[:cut]
        return text.strip()

    def is_final(self, text: str) -> bool:
        """Does this step text state the final answer? (``fewshot``: a blank line also ends the
        solution -- a base model that has finished leaves one before the next "Question:".)"""
        if self.name == "fewshot" and not text.strip():
            return True
        return any(marker in text for marker in self.answer_markers)
