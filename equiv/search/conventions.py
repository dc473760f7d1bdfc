"""Text conventions that several parts of search must agree on, each with one owner here.

Math-Shepherd's step tag is written after every step by the ``mistral_sft`` policy format (it is
that policy's stop string), read by the Math-Shepherd PRM (P(``+``) at each tag), dropped by
answer extraction ("The answer is: 42 ки") and put in the tiny PRM's vocabulary.
"""

from __future__ import annotations

MATH_SHEPHERD_STEP_TAG = "ки"
"""The step tag of Math-Shepherd (``peiyi9979/math-shepherd-mistral-7b-prm`` and its SFT policy)."""
