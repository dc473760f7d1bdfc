"""The ``code`` prompt format: step-level search over Python programs (HumanEval).

Steps are separated by a blank line (``"\\n\\n"``): a program's natural blocks (imports, a
helper function, the body's paragraphs). Unlike the math formats a step keeps its *leading
indentation* -- ``"    return x"`` stripped to ``"return x"`` would no longer be the same
program -- so :meth:`CodePromptFormat.clean_step` only drops surrounding blank lines and trailing
spaces. A solution is final when the model ends its turn (EOS) or a step closes the code fence (its last
line is three backticks and nothing else).

With a chat template the prompt is ``[system, user]`` (Qwen-style, like ``qwen25_math_chat``);
without one it is the question, a blank line, and the steps so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from equiv.search.policies.prompt_format import PromptFormat

CODE_SYSTEM = (
    "You are a careful Python programmer. Complete the function the user gives you. Answer with "
    "the whole function in one ```python code block, with no tests and no explanation."
)


@dataclass(frozen=True)
class CodePromptFormat(PromptFormat):
    """Prompt conventions for code (module docstring)."""

    def build(self, question: str, steps: Sequence[str], tokenizer: Any | None = None) -> str:
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": question})
            head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            head = question.rstrip() + "\n\n"
        return head + "".join(step + self.step_suffix for step in steps)

    def clean_step(self, text: str) -> str:
        cut = text.find(self.step_delimiter)
        if cut >= 0:
            text = text[:cut]
        return text.strip("\n").rstrip()

    def is_final(self, text: str) -> bool:
        lines = text.rstrip().splitlines()
        return bool(lines) and lines[-1].strip() == "```"


CODE_FORMAT = CodePromptFormat(
    name="code",
    step_delimiter="\n\n",
    step_suffix="\n\n",
    answer_markers=(),
    system_prompt=CODE_SYSTEM,
)
