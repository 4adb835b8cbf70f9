"""The LLM guide and reviewer against a real server process on loopback.

The server is ``feedbackgym.language.stand_in_server``: a STAND-IN that speaks the OpenAI chat API
and
answers from the built-in SubgoalGuide / TrajectoryReviewer (not a language model), and
misbehaves when the model name asks (bad JSON, off-schema JSON, slow, HTTP 500).
"""

import socket
import sys
import time

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.chat import BASE_URL_ENV, MODEL_ENV, ChatClient, PromptTemplate
from feedbackgym.core import StepRecord, Subgoal
from feedbackgym.errors import ConfigError, DependencyNotInstalled, GeneratorError, ReplyError
from feedbackgym.feedback import GuideRequest, ReviewRequest, as_guide
from feedbackgym.feedback.llm import LLMGuide, LLMReviewer
from feedbackgym.wrappers import AddGuide, AddReview

pytest.importorskip("openai")
from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402

LIB = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))
REQUEST = GuideRequest(LIB, {"a": True, "b": False}, step=4)
RECORDS = (StepRecord(0, 1, 0.0, ()), StepRecord(1, 2, 0.0, ("a",)), StepRecord(2, 3, 0.0, ("a",)))


@pytest.fixture(scope="module")
def url():
    with stand_in_server() as base_url:
        yield base_url


def _episode(env, seed=0):
    """Plays the expert; returns the infos."""
    _, info = env.reset(seed=seed)
    infos = [info]
    while True:
        *_, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        infos.append(info)
        if terminated or truncated:
            return infos


def test_llm_guide_and_reviewer_on_ops_through_the_wrappers(url):
    def wrapped(guide=None, reviewer=None):
        env = gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode="text")
        env = AddGuide(env, guide=guide, dropout=0.0, deadline_ms=10_000)
        return AddReview(env, reviewer=reviewer, deadline_ms=10_000)

    llm = wrapped(LLMGuide(url, "stand-in"), LLMReviewer(url, "stand-in"))
    built_in = wrapped()
    got, expected = _episode(llm), _episode(built_in)
    hints = [i["feedback"]["guide"]["text"] for i in got if i["feedback"]["guide"]]
    assert hints and hints == [
        i["feedback"]["guide"]["text"] for i in expected if i["feedback"]["guide"]
    ]
    review, reference = got[-1]["feedback"]["review"], expected[-1]["feedback"]["review"]
    assert review["text"] == reference["text"] and review["credit"] == []
    assert llm.feedback_stats()["misses"] == 0
    llm.close()
    built_in.close()


@pytest.mark.parametrize(
    "mode, cause", [("bad-json", "reply"), ("off-schema", "reply"), ("error", "server")]
)
def test_a_bad_reply_or_a_failing_server_is_a_counted_miss(url, mode, cause):
    guide = LLMGuide(url, f"stand-in:{mode}")
    reviewer = LLMReviewer(url, f"stand-in:{mode}")
    assert guide.hint(REQUEST) is None
    assert reviewer.review(ReviewRequest(RECORDS, LIB, success=False)) is None
    assert guide.failures == {cause: 1} and reviewer.misses == 1


def test_a_slow_server_times_out_as_a_miss_and_the_wrapper_counts_it(url):
    guide = LLMGuide(url, "stand-in:slow=3", timeout_s=0.3)
    start = time.perf_counter()
    assert guide.hint(REQUEST) is None
    assert time.perf_counter() - start < 2.0 and guide.failures == {"server": 1}
    env = AddGuide(
        gym.make("feedbackgym/OpsIncidentEasy-v0"), guide=guide, dropout=0.0, deadline_ms=2000
    )
    env.reset(seed=0)
    assert env.feedback_stats()["misses"] >= 2  # its own miss, and the wrapper's


def test_the_cache_keeps_parsed_replies_by_prompt(url):
    guide = LLMGuide(url, "stand-in")
    first = guide.hint(REQUEST)
    again = guide.hint(GuideRequest(LIB, {"a": True, "b": False}, step=9))  # the step is not asked
    assert first.subgoal_ids == again.subgoal_ids == ("b",) and again.step == 9
    assert (guide.client.calls, guide.client.cache_hits) == (1, 1)
    bad = LLMGuide(url, "stand-in:bad-json")
    bad.hint(REQUEST)
    bad.hint(REQUEST)
    assert (bad.client.calls, bad.misses) == (2, 2)  # a reply that failed is asked again


@pytest.mark.parametrize(
    "reply, problem",
    [
        ('{"subgoal_ids": ["c"]}', "unknown subgoals"),
        ('{"subgoal_ids": ["a"]}', "already done"),
        ('{"subgoal_ids": ["b", "b"]}', "repeats"),
        ('{"subgoal_ids": "b"}', "off the guide schema"),
        ('{"subgoal_ids": [], "why": "x"}', "off the guide schema"),
        ("[1]", "not an object"),
    ],
)
def test_guide_replies_are_held_to_the_schema(reply, problem):
    with pytest.raises(ReplyError, match=problem):
        LLMGuide("http://127.0.0.1:1/v1", "m").parse(reply, REQUEST)


@pytest.mark.parametrize(
    "reply, problem",
    [
        ('{"summary": "s", "score": 2, "reusable": [], "reexplore": []}', "score"),
        (
            '{"summary": "s", "score": 0.5, "reexplore": [{"step": 7, "state": "x", '
            '"suggestion": "y", "reason": "z"}]}',
            "not in 0-2",
        ),
        (
            '{"summary": "s", "score": 0.5, "reusable": [{"start": 0, "end": 1, '
            '"subgoal_id": "q"}]}',
            "unknown subgoal",
        ),
    ],
)
def test_review_replies_are_held_to_the_schema(reply, problem):
    request = ReviewRequest(RECORDS, LIB, success=False)
    with pytest.raises(ReplyError, match=problem):
        LLMReviewer("http://127.0.0.1:1/v1", "m").parse(reply, request)


def test_named_as_module_class_it_reads_the_server_from_the_environment(url, monkeypatch):
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    with pytest.raises(GeneratorError, match=BASE_URL_ENV):
        as_guide("feedbackgym.feedback.llm:LLMGuide")
    monkeypatch.setenv(BASE_URL_ENV, url)
    monkeypatch.setenv(MODEL_ENV, "stand-in")
    assert as_guide("feedbackgym.feedback.llm:LLMGuide").hint(REQUEST).subgoal_ids == ("b",)


def test_templates_from_files(tmp_path, url):
    custom = tmp_path / "guide.txt"
    custom.write_text("Be brief.\n---\nNext for $task?\n```json\n$request\n```\n")
    assert LLMGuide(url, "stand-in", template=custom).hint(REQUEST).subgoal_ids == ("b",)
    custom.write_text("no separator $task")
    with pytest.raises(ConfigError, match="no '---' line"):
        LLMGuide(url, "stand-in", template=custom)
    custom.write_text("s\n---\n$nothing_known")
    with pytest.raises(ConfigError, match=r"unknown placeholder \$nothing_known"):
        LLMGuide(url, "stand-in", template=custom).messages(REQUEST)
    assert "request" in PromptTemplate.load("review").placeholders()


def test_without_openai_the_error_names_the_llm_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(DependencyNotInstalled, match=r"feedbackgym\[llm\]"):
        ChatClient("http://127.0.0.1:1/v1", "m").reply([{"role": "user", "content": "hi"}])


def test_the_stand_in_process_is_gone_after_its_block():
    with stand_in_server() as base_url:
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        assert ChatClient(base_url, "stand-in").models() == ["stand-in"]
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_named_generators_take_the_timeout_and_constraint_from_the_environment(monkeypatch, url):
    from feedbackgym.chat import CONSTRAIN_ENV, TIMEOUT_ENV

    monkeypatch.setenv(BASE_URL_ENV, url)
    monkeypatch.setenv(MODEL_ENV, "stand-in")
    monkeypatch.setenv(TIMEOUT_ENV, "7.5")
    monkeypatch.setenv(CONSTRAIN_ENV, "json")
    guide = as_guide("feedbackgym.feedback.llm:LLMGuide")
    assert (guide.client.timeout_s, guide.client.constrain) == (7.5, "json")
    assert guide.hint(REQUEST).subgoal_ids == ("b",)
    assert LLMReviewer(timeout_s=2).client.timeout_s == 2.0  # an argument wins
    monkeypatch.setenv(TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match="FEEDBACKGYM_LLM_TIMEOUT must be a number"):
        LLMGuide()


def test_the_guides_answers_are_what_its_parse_accepts():
    lib = tuple(Subgoal(i, f"reach {i}", bool) for i in "abcd")
    request = GuideRequest(lib, {"a": True}, step=0)
    guide = LLMGuide("http://127.0.0.1:1/v1", "m", lookahead=2)
    answers = guide.answers(request)
    assert len(answers) == 3 + 3 * 2  # one of three, or an ordered pair
    assert all(guide.parse(a, request) is not None for a in answers)
    schema = guide.schema(request)["properties"]["subgoal_ids"]
    assert schema["items"]["enum"] == ["b", "c", "d"] and schema["maxItems"] == 2


def test_a_guide_with_every_subgoal_done_asks_nothing():
    guide = LLMGuide("http://127.0.0.1:1/v1", "m")  # no server: a call would be a miss
    assert guide.hint(GuideRequest(LIB, {"a": True, "b": True}, step=2)) is None
    assert (guide.client.calls, guide.misses) == (0, 0)


def test_the_review_schema_offers_only_the_windows_steps_and_the_subgoals_reached():
    request = ReviewRequest(RECORDS, LIB, success=False)
    properties = LLMReviewer("http://127.0.0.1:1/v1", "m").schema(request)["properties"]
    reusable = properties["reusable"]["items"]["properties"]
    assert reusable["start"] == {"enum": [0, 1, 2]} and reusable["subgoal_id"] == {"enum": ["a"]}
    nothing = ReviewRequest(RECORDS[:1], LIB, success=False)
    assert LLMReviewer("http://127.0.0.1:1/v1", "m").schema(nothing)["properties"]["reusable"] == {
        "enum": [[]]
    }
