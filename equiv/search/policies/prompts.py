"""Prompt formats: how a question and the steps so far become the policy's input text.

Each format owns three conventions that must agree with how its policy was trained:

- the *prompt* (chat template or raw text) followed by the steps already taken,
- the *step delimiter*, the stop string that ends one step (the text before it is the step),
- the *answer markers*, text that shows the solution reached its final answer, and whether such
  a step ends the solution (``end_at_answer``) or only EOS does.

``qwen25_math_chat``  Qwen2.5-Math-Instruct, OpenR-style step search. The tokenizer's own chat
    template renders ``[system, user]`` with ``add_generation_prompt=True``; the system prompt is
    Qwen's "Please reason step by step, and put your final answer within \\boxed{}.". Steps are
    separated by a blank line: the delimiter is ``"\\n\\n"`` and each step taken so far is
    appended as ``step + "\\n\\n"``. Final answer: ``\\boxed{``, but the solution ends only at
    EOS (``end_at_answer`` off), as in the reference.
``mistral_sft``  Math-Shepherd's ``peiyi9979/mistral-7b-sft``: raw text ``question + " "`` and then
    ``"Step k: ... ки\\n"`` per step (the model writes the ``Step k:`` prefix itself). The step tag
    ``ки`` is the delimiter. Final answer: ``The answer is``, but the solution ends only at EOS
    (``end_at_answer`` off), as in the reference.
``plain``  Any base model: ``question + "\\n\\n"`` then steps separated by blank lines.
``fewshot``  Base (pretrained, non-chat) models: solved exemplars, then ``Question: ...``
    ``Answer:`` and one step per line (delimiter ``"\\n"``); see :mod:`.fewshot`. Final answer:
    ``The answer is`` or ``####``.
``code``  Python programs (HumanEval), :mod:`equiv.search.policies.code_format`: blank-line steps
    that keep their indentation; final at EOS or a closing code fence.

Steps are stored stripped of surrounding whitespace; the format re-adds its separators, so a
step's text never carries the delimiter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from equiv.errors import InputError, check_choice
from equiv.search.conventions import MATH_SHEPHERD_STEP_TAG
from equiv.search.policies.code_format import CODE_FORMAT
from equiv.search.policies.prompt_format import PromptFormat


QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


FORMATS: dict[str, PromptFormat] = {
    "qwen25_math_chat": PromptFormat(
        name="qwen25_math_chat",
        step_delimiter="\n\n",
        step_suffix="\n\n",
        answer_markers=("\\boxed{", "\\boxed {"),
        system_prompt=QWEN_MATH_SYSTEM,
        end_at_answer=False,
    ),
    "mistral_sft": PromptFormat(
        name="mistral_sft",
        step_delimiter=MATH_SHEPHERD_STEP_TAG,
        step_suffix=f" {MATH_SHEPHERD_STEP_TAG}\n",
        answer_markers=("The answer is", "the answer is"),
        end_at_answer=False,
    ),
    "plain": PromptFormat(
        name="plain",
        step_delimiter="\n\n",
        step_suffix="\n\n",
        answer_markers=("\\boxed{", "The answer is", "the answer is", "####"),
    ),
    "fewshot": PromptFormat(
        name="fewshot",
        step_delimiter="\n",
        step_suffix="\n",
        answer_markers=("The answer is", "the answer is", "####"),
    ),
}

FORMATS["code"] = CODE_FORMAT  # HumanEval: its own module and class (steps keep their indentation)


def resolve_format(
    name: str,
    model: str,
    tokenizer: Any | None = None,
    *,
    step_delimiter: str | None = None,
    system_prompt: str | None = None,
    end_at_answer: bool | None = None,
) -> PromptFormat:
    """Pick the format for a model; ``auto`` decides from the model name and tokenizer.

    ``auto``: a model name mentioning ``mistral`` or ``shepherd`` -> ``mistral_sft`` (Math-Shepherd's
    policy has no chat template); a tokenizer with a chat template -> ``qwen25_math_chat``;
    otherwise ``plain``. ``step_delimiter`` / ``system_prompt`` override the format's own.
    """
    if name == "auto":
        lowered = model.lower()
        if "mistral" in lowered or "shepherd" in lowered:
            name = "mistral_sft"
        elif tokenizer is not None and getattr(tokenizer, "chat_template", None):
            name = "qwen25_math_chat"
        else:
            name = "plain"
    check_choice(name, ("auto", *FORMATS), "policy.prompt_format", what="prompt format")  # "auto" is resolved above
    fmt = FORMATS[name]
    if end_at_answer is not None:
        fmt = dataclasses.replace(fmt, end_at_answer=end_at_answer)
    if step_delimiter is not None or system_prompt is not None:
        if step_delimiter == "":
            raise InputError("the step delimiter must not be empty", field="policy.step_delimiter")
        delim = step_delimiter if step_delimiter is not None else fmt.step_delimiter
        suffix = fmt.step_suffix if step_delimiter is None else delim
        fmt = dataclasses.replace(  # keeps the format's class (the code format's own step rules)
            fmt,
            step_delimiter=delim,
            step_suffix=suffix,
            system_prompt=system_prompt if system_prompt is not None else fmt.system_prompt,
            end_at_answer=fmt.end_at_answer,
        )
    return fmt
