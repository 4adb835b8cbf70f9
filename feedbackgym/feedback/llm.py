"""LLM feedback generators over an OpenAI-compatible chat API (vLLM, llama.cpp's server, Ollama).

:class:`LLMGuide` and :class:`LLMReviewer` meet the
:class:`~feedbackgym.feedback.generators.Guide` and
:class:`~feedbackgym.feedback.generators.Reviewer` protocols. Each asks a chat
model (a base URL and a model name) with a prompt made from a template file,
and reads the reply against a strict schema (:class:`GuideAnswer`,
:class:`ReviewAnswer`): a reply that is not one JSON object of that shape, or
names subgoals or steps the request does not have, is a *miss* (counted in
``misses``, which the wrappers add to theirs, and logged), never an exception
in training; so is a server that times out, refuses or fails. Replies that
parsed are cached by prompt (least recently used first out).

A prompt template is a text file: the system message, a line ``---``, the
user message, with ``$name`` placeholders (:class:`string.Template`). The
built-in ones (``guide``, ``review``, ``agent``) ship in
``feedbackgym/chat/prompts/``; pass ``template=PATH`` for your own. Each
built-in prompt ends with the request as JSON in a fenced block, so a server
can read it (``python -m feedbackgym.language.stand_in_server`` does: a stand-in that
answers from the built-in generators, for tests and trying things out).

Each reply is asked for held to its schema, the way the agent's replies are
held to the actions (``constrain``): with ``"grammar"`` (the default), the
guide's answers are few enough to list (every ordered choice of at most
``lookahead`` subgoals not done), so they go as a choice grammar (a token mask
on the packaged model's server), and the review as ``response_format``
``{"type": "json_object", "schema": ...}`` (:meth:`LLMGuide.schema`,
:meth:`LLMReviewer.schema`: ids, steps and scores as enums, texts and lists
bounded), the form llama.cpp honours (the OpenAI ``json_schema`` form answers
HTTP 500 there); ``"json"`` sends the schema for both; ``"none"`` asks for
any JSON object. Every reply is still parsed and checked.

Named as ``"feedbackgym.feedback.llm:LLMGuide"`` (made with no arguments), a
generator reads the server from ``FEEDBACKGYM_LLM_BASE_URL``,
``FEEDBACKGYM_LLM_MODEL`` and, if the server wants one,
``FEEDBACKGYM_LLM_API_KEY``; its timeout from ``FEEDBACKGYM_LLM_TIMEOUT``
(seconds, default 30) and its constraint from ``FEEDBACKGYM_LLM_CONSTRAIN``
(``feedbackgym agent --feedback llm`` sets all of them from its flags). The
``openai`` package (the ``llm`` extra) is imported on the first call.

Example:
    >>> from feedbackgym.core import Subgoal
    >>> lib = (Subgoal("key", "pick up the key", bool), Subgoal("door", "open the door", bool))
    >>> guide = LLMGuide("http://127.0.0.1:8000/v1", "qwen2.5-0.5b-instruct")
    >>> print(guide.messages(GuideRequest(lib, {"key": True, "door": False}, step=3))[1]["content"])
    ... # doctest: +ELLIPSIS
    Task: (not named)
    <BLANKLINE>
    Subgoals (id: description [requires ...] - done or not done):
    - key: pick up the key - done
    - door: open the door - not done
    ...
    >>> guide.parse('{"subgoal_ids": ["door"]}', GuideRequest(lib, {"key": True}, step=3)).text
    'Hint: first open the door'
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import permutations
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from feedbackgym.chat import (
    CONSTRAIN_ENV,
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    ChatClient,
    PromptTemplate,
    compact_json,
    json_object,
)
from feedbackgym.core import Hint, ReexplorePoint, ReusableSegment, Review, Subgoal
from feedbackgym.errors import ChatError, ConfigError, ReplyError
from feedbackgym.feedback.generators import WARN_EVERY, GuideRequest, ReviewRequest
from feedbackgym.feedback.guide import hint_for

__all__ = [
    "MAX_GUIDE_CHOICES",
    "REVIEW_ITEMS",
    "REVIEW_TEXT_CHARS",
    "SCORES",
    "GuideAnswer",
    "LLMGuide",
    "LLMReviewer",
    "ReviewAnswer",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_GUIDE_CHOICES = 512
"""The most guide answers listed as a choice grammar; past that the guide sends its schema."""
REVIEW_TEXT_CHARS = 120
"""The longest text field a constrained review answer may have (summary, state, ...)."""
REVIEW_ITEMS = 2
"""The most reusable stretches, and re-explore points, a constrained review answer may list."""
SCORES = tuple(n / 10 for n in range(11))
"""The scores a constrained review answer may give (0, 0.1, ..., 1): 1 for a success, below
it for a failure (the score says how close the attempt came)."""
_GUIDE_TOKENS = 96
"""The most tokens a guide reply may take (a few ids in one JSON object)."""


# --- the answers' schemas -------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class GuideAnswer(_Strict):
    """What an LLM guide answers: the subgoal ids to pursue next, first one first.

    Example:
        >>> GuideAnswer.model_validate({"subgoal_ids": ["door"]}).subgoal_ids
        ['door']
    """

    subgoal_ids: list[str]

    @classmethod
    def from_hint(cls, hint: Hint | None) -> GuideAnswer:
        """The answer that gives ``hint`` (``None``: no subgoal)."""
        return cls(subgoal_ids=list(hint.subgoal_ids) if hint is not None else [])


class ReusableAnswer(_Strict):
    """A reusable stretch of steps in a :class:`ReviewAnswer`."""

    start: int
    end: int
    subgoal_id: str


class ReexploreAnswer(_Strict):
    """A step to explore again in a :class:`ReviewAnswer`."""

    step: int
    state: str = Field(min_length=1)
    suggestion: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class ReviewAnswer(_Strict):
    """What an LLM reviewer answers.

    Example:
        >>> answer = ReviewAnswer.model_validate_json(
        ...     '{"summary": "Stalled.", "score": 0.4, "reusable": [], "reexplore": []}')
        >>> answer.score
        0.4
    """

    summary: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=1.0)
    reusable: list[ReusableAnswer] = []
    reexplore: list[ReexploreAnswer] = []

    @classmethod
    def from_review(cls, review: Review) -> ReviewAnswer:
        """The answer that gives ``review`` (less its credit, which an answer does not carry)."""
        return cls(
            summary=review.summary,
            score=review.score,
            reusable=[
                ReusableAnswer(start=s.start, end=s.end, subgoal_id=s.subgoal_id)
                for s in review.reusable
            ],
            reexplore=[
                ReexploreAnswer(
                    step=p.step, state=p.state_summary, suggestion=p.suggestion, reason=p.reason
                )
                for p in review.reexplore
            ],
        )


# --- the generators -------------------------------------------------------------------------


def _subgoal_lines(library: Sequence[Subgoal], progress: Mapping[str, bool], done: str) -> str:
    return "\n".join(
        f"- {sg.id}: {sg.description}"
        + (f" [requires {', '.join(sg.requires)}]" if sg.requires else "")
        + (f" - {done}" if progress.get(sg.id) else f" - not {done}")
        for sg in library
    )


class _LLMGenerator:
    """What the LLM guide and reviewer share: the client, the template, counting misses."""

    template_name: ClassVar[str]

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        template: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        cache_size: int = 1024,
        api_key: str | None = None,
        constrain: str | None = None,
        max_tokens: int = 512,
    ) -> None:
        self.client = ChatClient(
            base_url,
            model,
            api_key=api_key,
            timeout_s=_timeout(timeout_s),
            cache_size=cache_size,
            constrain=constrain or os.environ.get(CONSTRAIN_ENV) or "grammar",
            max_tokens=max_tokens,
        )
        self.template = PromptTemplate.load(template or self.template_name)
        self.failures: Counter[str] = Counter()
        """Misses by cause: ``"server"`` (failed, timed out, unreachable) or ``"reply"``."""

    @property
    def misses(self) -> int:
        """Calls that gave no feedback because the server or its reply failed."""
        return sum(self.failures.values())

    def _ask(
        self,
        messages: list[dict[str, str]],
        parse: Callable[[str], T],
        schema: Mapping[str, Any],
        choices: Sequence[str] | None = None,
    ) -> T | None:
        """``parse`` of the reply, held to ``choices`` or ``schema`` as ``constrain`` says."""
        constrain = self.client.constrain
        try:
            if constrain == "grammar" and choices:
                return self.client.complete(messages, parse, choices=choices)
            if constrain == "none":
                return self.client.complete(messages, parse, json_mode=True)
            return self.client.complete(messages, parse, schema=schema)
        except (ChatError, ReplyError) as error:
            cause = "server" if isinstance(error, ChatError) else "reply"
            self.failures[cause] += 1
            if self.misses % WARN_EVERY == 1:
                logger.warning(
                    "%s: no feedback (%d misses so far: %s): %s",
                    type(self).__name__,
                    self.misses,
                    dict(self.failures),
                    error,
                )
            return None

    def close(self) -> None:
        """Closes the client's connection."""
        self.client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.base_url!r}, {self.client.model!r})"


class LLMGuide(_LLMGenerator):
    """A guide that asks a chat model which subgoals to pursue next.

    The model sees the subgoal library with progress, the text observation
    (when there is one) and the request as JSON, and answers
    ``{"subgoal_ids": [...]}`` (:class:`GuideAnswer`): ids of subgoals not yet
    done, at most ``lookahead``, first one first (none: no hint). The hint's
    words come from the library, so a model can name subgoals but never write
    an action into a hint. The prompt leaves out the step, so requests that
    differ only in it share a cache entry.

    The reply is held to the answers the request allows (:meth:`answers`:
    at least one subgoal not done, at most ``lookahead``, none repeated), listed
    as a choice grammar, or as :meth:`schema` (see the module docstring). When
    every subgoal is done there is nothing to ask: no hint, no call.

    It runs off the step (it is not ``inline``): give the wrapper a
    ``deadline_ms`` the model can meet.

    Args:
        base_url: The chat API's base URL (default ``$FEEDBACKGYM_LLM_BASE_URL``).
        model: The model name (default ``$FEEDBACKGYM_LLM_MODEL``).
        template: A prompt template file (default: the built-in ``guide``).
        timeout_s: How long a call waits for the reply (default
            ``$FEEDBACKGYM_LLM_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`).
        lookahead: Most subgoals a hint names, unless the request's
            ``options["lookahead"]`` says otherwise.
        cache_size: Parsed replies kept.
        api_key: For servers that want one (default ``$FEEDBACKGYM_LLM_API_KEY``).
        constrain: How replies are held to the schema (one of
            :data:`CONSTRAINTS`; default ``$FEEDBACKGYM_LLM_CONSTRAIN``, else ``"grammar"``).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> from feedbackgym.wrappers import AddGuide
        >>> guide = LLMGuide("http://127.0.0.1:8000/v1", "qwen2.5-0.5b-instruct")
        >>> env = AddGuide(gym.make("feedbackgym/OpsIncidentEasy-v0"), guide=guide,
        ...                deadline_ms=5000)
    """

    template_name = "guide"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        template: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        lookahead: int = 2,
        cache_size: int = 1024,
        api_key: str | None = None,
        constrain: str | None = None,
    ) -> None:
        if lookahead < 1:
            raise ConfigError(f"lookahead must be at least 1, got {lookahead}")
        super().__init__(
            base_url,
            model,
            template=template,
            timeout_s=timeout_s,
            cache_size=cache_size,
            api_key=api_key,
            constrain=constrain,
            max_tokens=_GUIDE_TOKENS,
        )
        self.lookahead = lookahead

    def messages(self, request: GuideRequest) -> list[dict[str, str]]:
        """The chat messages asking for ``request``'s hint."""
        data = request.to_dict()
        del data["step"]  # the answer does not depend on it
        data.pop("text", None)  # shown above it once: the block is for servers that read it
        return self.template.messages(
            task=request.task or "(not named)",
            subgoals=_subgoal_lines(request.library, request.progress, "done"),
            observation=f"Current observation:\n{request.text}\n" if request.text else "",
            lookahead=str(self._lookahead(request)),
            request=compact_json({"kind": "hint", **data}),
        )

    def parse(self, content: str, request: GuideRequest) -> Hint | None:
        """The hint a reply gives for ``request`` (``None`` for no subgoal).

        Raises:
            ReplyError: The reply is off the schema, or names unknown, done,
                repeated or too many subgoals.
        """
        return self._hint(self._answer(content, request), request)

    def hint(self, request: GuideRequest) -> Hint | None:
        """Asks the model; ``None`` (a counted miss) when the server or its reply failed."""
        if not self._open(request):
            return None  # every subgoal done: the one answer is no subgoal
        answers = self.answers(request)
        answer = self._ask(
            self.messages(request),
            lambda content: self._answer(content, request),
            self.schema(request),
            answers if len(answers) <= MAX_GUIDE_CHOICES else None,
        )
        return None if answer is None else self._hint(answer, request)

    def schema(self, request: GuideRequest) -> dict[str, Any]:
        """The JSON schema of the answers to ``request``: 1 to ``lookahead`` ids not done.

        Example:
            >>> lib = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool))
            >>> guide = LLMGuide("http://127.0.0.1:8000/v1", "m")
            >>> guide.schema(GuideRequest(lib, {"a": True}, step=0))["properties"]["subgoal_ids"]
            {'type': 'array', 'items': {'enum': ['b']}, 'minItems': 1, 'maxItems': 1}
        """
        ids = self._open(request)
        items = {
            "type": "array",
            "items": {"enum": ids},
            "minItems": 1,
            "maxItems": min(self._lookahead(request), len(ids)),
        }
        return {
            "type": "object",
            "properties": {"subgoal_ids": items},
            "required": ["subgoal_ids"],
            "additionalProperties": False,
        }

    def answers(self, request: GuideRequest) -> list[str]:
        """Every answer to ``request`` the schema allows, as the JSON text the prompt shows.

        Ordered choices of 1 to ``lookahead`` subgoals not done, without repeats.

        Example:
            >>> lib = tuple(Subgoal(i, f"reach {i}", bool) for i in "abc")
            >>> guide = LLMGuide("http://127.0.0.1:8000/v1", "m", lookahead=2)
            >>> answers = guide.answers(GuideRequest(lib, {"a": True}, step=0))
            >>> len(answers), answers[0], answers[-1]
            (4, '{"subgoal_ids": ["b"]}', '{"subgoal_ids": ["c", "b"]}')
        """
        ids = self._open(request)
        out: list[str] = []
        for size in range(1, min(self._lookahead(request), len(ids)) + 1):
            out.extend(json.dumps({"subgoal_ids": list(pick)}) for pick in permutations(ids, size))
            if len(out) > MAX_GUIDE_CHOICES:
                break
        return out

    @staticmethod
    def _open(request: GuideRequest) -> list[str]:
        """The ids of the subgoals not done, in the library's order."""
        return [sg.id for sg in request.library if not request.progress.get(sg.id)]

    def _lookahead(self, request: GuideRequest) -> int:
        return int(request.options.get("lookahead", self.lookahead))

    def _answer(self, content: str, request: GuideRequest) -> GuideAnswer:
        try:
            answer = GuideAnswer.model_validate(json_object(content))
        except ValidationError as error:
            raise ReplyError(f"the reply is off the guide schema: {_first(error)}") from None
        ids = answer.subgoal_ids
        known = {sg.id for sg in request.library}
        if unknown := [i for i in ids if i not in known]:
            raise ReplyError(f"the reply names unknown subgoals {unknown}")
        if done := [i for i in ids if request.progress.get(i)]:
            raise ReplyError(f"the reply names subgoals already done: {done}")
        if len(set(ids)) != len(ids) or len(ids) > self._lookahead(request):
            raise ReplyError(
                f"the reply names {len(ids)} subgoals (repeats or more than "
                f"{self._lookahead(request)}): {list(ids)}"
            )
        return answer

    @staticmethod
    def _hint(answer: GuideAnswer, request: GuideRequest) -> Hint | None:
        if not answer.subgoal_ids:
            return None
        return hint_for(request.library, answer.subgoal_ids, request.step)


class LLMReviewer(_LLMGenerator):
    r"""A reviewer that asks a chat model to critique a finished episode's window.

    The model sees the subgoals (reached or not), each step of the window
    (action, reward, subgoals done after it) and the request as JSON, and
    answers a :class:`ReviewAnswer`: a summary, a score in [0, 1], reusable
    stretches (each reaching a subgoal) and steps to explore again with what
    to try there. Steps must lie in the window and ids in the library. The
    review carries no per-step credit (the ``credit`` channel stays empty)
    and never an expert action.

    The reply is held to :meth:`schema` (the window's steps, the ids of the
    subgoals reached in it and the scores of :data:`SCORES` as enums: 1 for a
    success, less for a failure; at most :data:`REVIEW_ITEMS`
    stretches and points, texts of at most
    :data:`REVIEW_TEXT_CHARS` characters) unless ``constrain`` is ``"none"``.

    It runs off the step (it is not ``inline``): a review not ready when its
    episode ends lands later, with ``review_episode`` naming its episode.

    Args:
        base_url: The chat API's base URL (default ``$FEEDBACKGYM_LLM_BASE_URL``).
        model: The model name (default ``$FEEDBACKGYM_LLM_MODEL``).
        template: A prompt template file (default: the built-in ``review``).
        timeout_s: How long a call waits for the reply (default
            ``$FEEDBACKGYM_LLM_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`).
        cache_size: Parsed replies kept.
        api_key: For servers that want one (default ``$FEEDBACKGYM_LLM_API_KEY``).
        constrain: How replies are held to the schema (one of
            :data:`CONSTRAINTS`; default ``$FEEDBACKGYM_LLM_CONSTRAIN``, else ``"grammar"``).

    Example:
        >>> from feedbackgym.core import StepRecord
        >>> lib = (Subgoal("a", "reach A", bool),)
        >>> request = ReviewRequest((StepRecord(0, 1, 0.0, ("a",)),), lib, success=True)
        >>> reply = ('{"summary": "Done.", "score": 1, "reusable": '
        ...          '[{"start": 0, "end": 0, "subgoal_id": "a"}], "reexplore": []}')
        >>> LLMReviewer("http://127.0.0.1:8000/v1", "m").parse(reply, request).text
        'Review of your last attempt (score 1.00): Done.\n- Reuse steps 0-0: they reached a.'
    """

    template_name = "review"

    def messages(self, request: ReviewRequest) -> list[dict[str, str]]:
        """The chat messages asking for ``request``'s review.

        Raises:
            ValueError: The window is empty.
        """
        records = request.records
        if not records:
            raise ValueError("a review needs at least one step")
        steps = "\n".join(
            f"{r.step}: {r.action_text or r.action} -> {r.reward:g}, done: "
            + (", ".join(r.done_ids) or "none")
            + (" (flagged harmful)" if r.harmful else "")
            for r in records
        )
        return self.template.messages(
            task=request.task or "(not named)",
            result="succeeded" if request.success else "did not succeed",
            outcome=request.outcome or "not given",
            subgoals=_subgoal_lines(request.library, request.progress, "reached"),
            first=str(records[0].step),
            last=str(records[-1].step),
            steps=steps,
            request=compact_json({"kind": "review", **request.to_dict()}),
        )

    def parse(self, content: str, request: ReviewRequest) -> Review:
        """The review a reply gives for ``request``.

        Raises:
            ReplyError: The reply is off the schema, or names steps outside the
                window or unknown subgoals.
        """
        try:
            answer = ReviewAnswer.model_validate(json_object(content))
        except ValidationError as error:
            raise ReplyError(f"the reply is off the review schema: {_first(error)}") from None
        first, last = request.records[0].step, request.records[-1].step
        known = {sg.id for sg in request.library}
        for segment in answer.reusable:
            if not first <= segment.start <= segment.end <= last:
                raise ReplyError(
                    f"reusable steps {segment.start}-{segment.end} are not in {first}-{last}"
                )
            if segment.subgoal_id not in known:
                raise ReplyError(f"reusable steps name unknown subgoal {segment.subgoal_id!r}")
        for point in answer.reexplore:
            if not first <= point.step <= last:
                raise ReplyError(f"re-explore step {point.step} is not in {first}-{last}")
        return Review(
            window=(first, last),
            reusable=tuple(ReusableSegment(s.start, s.end, s.subgoal_id) for s in answer.reusable),
            reexplore=tuple(
                ReexplorePoint(p.step, p.state, p.suggestion, p.reason) for p in answer.reexplore
            ),
            summary=answer.summary,
            score=answer.score,
            success=request.success,
        )

    def review(self, request: ReviewRequest) -> Review | None:
        """Asks the model; ``None`` (a counted miss) when the server or its reply failed."""
        return self._ask(
            self.messages(request),
            lambda content: self.parse(content, request),
            self.schema(request),
        )

    def schema(self, request: ReviewRequest) -> dict[str, Any]:
        """The JSON schema of the answers to ``request`` (the window's steps, the library's ids).

        Example:
            >>> from feedbackgym.core import StepRecord
            >>> lib = (Subgoal("a", "reach A", bool),)
            >>> request = ReviewRequest((StepRecord(4, 1, 0.0, ("a",)),), lib, success=True)
            >>> LLMReviewer("http://127.0.0.1:8000/v1", "m").schema(request)["required"]
            ['summary', 'score', 'reusable', 'reexplore']
        """
        steps = {"enum": [r.step for r in request.records]}
        text = {"type": "string", "minLength": 1, "maxLength": REVIEW_TEXT_CHARS}
        before = set(request.initial_done)
        reached = [i for i, done in request.progress.items() if done and i not in before]

        def items(properties: dict[str, Any], most: int = REVIEW_ITEMS) -> dict[str, Any]:
            return {"type": "array", "maxItems": most, "items": _object_schema(properties)}

        return _object_schema(
            {
                "summary": text,
                "score": {"enum": [1.0] if request.success else list(SCORES[:-1])},
                "reusable": items(
                    {"start": steps, "end": steps, "subgoal_id": {"enum": reached}},
                    most=min(REVIEW_ITEMS, len(reached)),
                )
                if reached
                else {"enum": [[]]},  # nothing reached: nothing to reuse
                "reexplore": items(
                    {"step": steps, "state": text, "suggestion": text, "reason": text}
                ),
            }
        )


def _object_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON object schema with exactly these properties, all required, in this order."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _timeout(timeout_s: float | None) -> float:
    """``timeout_s``, else ``$FEEDBACKGYM_LLM_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`.

    Raises:
        ConfigError: The variable is not a number.
    """
    if timeout_s is not None:
        return timeout_s
    value = os.environ.get(TIMEOUT_ENV)
    if not value:
        return DEFAULT_TIMEOUT_S
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{TIMEOUT_ENV} must be a number of seconds, got {value!r}") from None


def _first(error: ValidationError) -> str:
    """The first problem pydantic found, in one line."""
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "the object"
    return f"{where}: {problem['msg']}"
