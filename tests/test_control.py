"""The feedback controller: one owner of the schedule, pushed to envs through one method."""

import json
import os
import time

import gymnasium as gym
import pytest

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.control import FeedbackController, RewardDropAlert
from feedbackgym.errors import ConfigError
from feedbackgym.protocol import SET_FEEDBACK_STATE, FeedbackEnv, FeedbackState, call_envs

ENV = "feedbackgym/OpsIncidentEasy-v0"
ADAPTIVE = {"metric": "return", "window": 2, "min_success": 0.5, "shift": 0.1}
CONFIG = merge_config(
    FeedbackConfig.for_arm("guide-then-review"),
    {"schedule": {"total": 20, "fade": 2, "adaptive": ADAPTIVE}},
)


def _write(path, text):
    path.write_text(text)
    stamp = time.time_ns() + 1_000_000
    os.utime(path, ns=(stamp, stamp))  # the mtime moves on coarse clocks too


def _trend(round_):
    """A made-up trend: returns rise, then flatten; success crosses the floor at round 6."""
    return {"mean_return": min(round_, 5) * 0.1, "success": 0.1 * round_, "loss": 1.0}


def test_an_interrupted_controller_restored_from_json_decides_as_an_uninterrupted_one():
    whole = FeedbackController(CONFIG)
    states = [whole.update(r, **(_trend(r - 1) if r else {})) for r in range(20)]
    assert {s.phase for s in states} == {"guide", "fade", "review"}
    assert whole.schedule.history  # the adaptive rule did move the switch

    first = FeedbackController(CONFIG)
    resumed_states = [first.update(r, **(_trend(r - 1) if r else {})) for r in range(7)]
    saved = json.loads(json.dumps(first.state_dict()))  # what a run directory keeps
    second = FeedbackController(CONFIG)
    second.load_state_dict(saved)
    resumed_states += [second.update(r, **_trend(r - 1)) for r in range(7, 20)]
    assert resumed_states == states
    assert second.schedule.history == whole.schedule.history


def test_states_reach_a_single_env_and_a_gymnasium_vector_env_through_one_method():
    single = feedbackgym.make(ENV, CONFIG)
    vector = gym.vector.SyncVectorEnv([lambda: feedbackgym.make(ENV, CONFIG)] * 3)
    assert isinstance(single.unwrapped, gym.Env) and isinstance(
        single.get_wrapper_attr("feedback_state"), FeedbackState
    )
    controller = FeedbackController(CONFIG, envs=single)
    controller.attach(vector)
    state = controller.update(15)
    assert state.phase == "review" and state.round == 15
    assert single.get_wrapper_attr("feedback_state") == state
    assert vector.get_attr("feedback_state") == (state,) * 3
    masked = state.masked()
    call_envs(single, SET_FEEDBACK_STATE, masked)
    assert single.get_wrapper_attr("feedback_state").hints_masked
    with pytest.raises(TypeError, match="SB3 VecEnv"):
        call_envs(object(), SET_FEEDBACK_STATE, state)
    vector.close()


def test_the_stack_meets_the_declared_protocol():
    env = feedbackgym.make(ENV, "guide")
    outer = env
    assert isinstance(outer, FeedbackEnv)
    stats = call_envs(env, "feedback_stats")[0]
    assert set(stats) == {"guide", "review", "reexplore"}


def test_a_config_edit_applies_to_every_env_at_the_next_round_and_a_bad_one_is_kept_out(
    tmp_path, caplog
):
    path = tmp_path / "feedback.yaml"
    _write(path, "guide: {every: 1, dropout: 0.0}\nschedule: {arm: guide, total: 10}\n")
    envs = gym.vector.SyncVectorEnv([lambda: feedbackgym.make(ENV, "guide")] * 2)
    controller = FeedbackController(path, envs=envs)
    assert envs.get_attr("feedback_state")[0].config_version == 1
    guides = [env.get_wrapper_attr("every") for env in envs.envs]
    assert guides == [1, 1]
    _write(path, "guide: {every: 4, dropout: 0.0}\nschedule: {arm: guide, total: 10}\n")
    assert [env.get_wrapper_attr("every") for env in envs.envs] == [1, 1]  # not before a round
    state = controller.update(1)
    assert state.config_version == 2 and state.config.guide.every == 4
    assert [env.get_wrapper_attr("every") for env in envs.envs] == [4, 4]
    _write(path, "guide: {every: 0}\n")
    state = controller.update(2)
    assert state.config_version == 2 and [e.get_wrapper_attr("every") for e in envs.envs] == [4, 4]
    assert not controller.config_changes[-1]["applied"]
    assert "guide.every" in controller.config_changes[-1]["reason"]
    assert "rejected" in caplog.text
    envs.close()


def test_the_controller_feeds_the_reward_drop_alert():
    fired = []
    controller = FeedbackController(alert=RewardDropAlert(hook=lambda r, m: fired.append(r), **RAW))
    for round_, mean_return in enumerate([1.0, 0.7, 0.5, 0.3]):
        controller.update(round_ + 1, mean_return=mean_return)
    assert fired == [3] and controller.alert_fired
    assert controller.state_dict()["alert"]["fired"] == [3]


def test_bad_inputs_are_refused_with_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="FeedbackConfig, a path or None"):
        FeedbackController(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot read"):
        FeedbackController(tmp_path / "missing.yaml")
    with pytest.raises(
        ConfigError, match=r"unknown arm 'teacher'; choose one of sparse, .*\+shaping"
    ):
        FeedbackConfig.for_arm("teacher")
    with pytest.raises(
        ConfigError, match=r"neither an arm \(sparse, shaping, guide, guide\+shaping"
    ):
        feedbackgym.make(ENV, "guide+shapin")
    with pytest.raises(ConfigError, match="schedule.arm: .*unknown arm 'guide-then-reviews'"):
        FeedbackConfig.from_mapping({"schedule": {"arm": "guide-then-reviews"}})


def test_without_a_config_the_envs_keep_their_own_settings():
    from feedbackgym.wrappers import AddGuide, FadeGuideToReview

    env = FadeGuideToReview(AddGuide(gym.make(ENV), every=7))
    FeedbackController(envs=env).update(3)
    assert env.get_wrapper_attr("every") == 7


def test_each_config_section_names_its_wrapper_s_keyword_arguments():
    import inspect

    from feedbackgym.config import (
        NETWORK_FIELDS,
        ExploreConfig,
        GuideConfig,
        ReviewConfig,
        ShapingConfig,
    )
    from feedbackgym.wrappers import AddExplorationBonus, AddGuide, AddReview, ShapeWithSubgoals

    for section, wrapper, renamed in (
        (ShapingConfig, ShapeWithSubgoals, {}),
        (ExploreConfig, AddExplorationBonus, {}),
        (GuideConfig, AddGuide, {"generator": "guide"}),  # the config names the generator
        (ReviewConfig, AddReview, {"generator": "reviewer"}),
    ):
        parameters = inspect.signature(wrapper.__init__).parameters
        names = {
            renamed.get(name, name): field
            for name, field in section.model_fields.items()
            if name not in NETWORK_FIELDS
        }
        assert set(names) <= set(parameters), wrapper.__name__
        for name, field in names.items():  # one home for each default
            if (wrapper, name) == (AddGuide, "dropout"):
                # the wrapper alone hints in every episode; the config holds the arms' recipe
                assert (parameters[name].default, field.default) == (0.0, 0.5)
                continue
            assert parameters[name].default == field.default, (wrapper.__name__, name)


def test_a_pushed_config_reaches_every_setting_of_the_stack():
    config = merge_config(
        FeedbackConfig.for_arm("guide"),
        {"guide": {"every": 3, "dropout_scope": "step"}, "shaping": {"terminal": "zero"}},
    )
    env = feedbackgym.make(ENV, "guide")
    FeedbackController(config, envs=env).update(1)
    guide, shaping = env.get_wrapper_attr("dropout_scope"), env.get_wrapper_attr("terminal")
    assert (env.get_wrapper_attr("every"), guide, shaping) == (3, "step", "zero")


RAW = {"smoothing": 1.0, "noise": 0.0}
"""The alert on the raw round means, as the spec words the rule."""


def test_a_round_without_a_finite_mean_neither_counts_nor_breaks_a_fall():
    alert = RewardDropAlert(**RAW)
    means = [1.0, 0.7, float("nan"), 0.5, 0.3]
    assert [alert.update(r, v) for r, v in enumerate(means)][-1]


@pytest.mark.parametrize(
    ("means", "cumulative", "each"),
    [
        ([1.0, 0.7, 0.5, 0.3], [3], [3]),  # > 20% each round: both
        ([1.0, 0.9, 0.8, 0.7], [3], []),  # 10% a round, 30% in all: cumulative only
        ([1.0, 0.95, 0.9, 0.85], [], []),  # 15% in all: neither
        ([1.0, 0.7, 0.7, 0.5, 0.3], [], []),  # a flat round breaks the streak
        ([1.0, 0.99, 0.98, 0.97, 0.5], [4], []),  # the last 3 rounds: 0.99 -> 0.5
        ([1.0, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05], [3, 6], [3, 6]),  # counts afresh after firing
        ([0.09, 0.06, 0.03, 0.0], [], []),  # under the floor: a rare success fading to 0
        ([-1.0, -1.3, -1.7, -2.2], [3], [3]),  # relative to |mean|: negative returns fall too
    ],
)
def test_the_two_readings_of_the_reward_drop_rule(means, cumulative, each):
    for reading, expected in (("cumulative", cumulative), ("each", each)):
        alert = RewardDropAlert(reading=reading, **RAW)
        for round_, mean in enumerate(means):
            alert.update(round_, mean)
        assert alert.fired == expected, reading


def test_the_reward_drop_alert_comes_from_the_config_and_resumes_its_streak():
    config = merge_config(FeedbackConfig(), {"alert": {"reading": "each", "floor": 0.0}})
    assert FeedbackController(config).alert.config.reading == "each"
    assert FeedbackController().alert.config.reading == "cumulative"
    with pytest.raises(ConfigError, match=r"alert\.reading"):
        merge_config(FeedbackConfig(), {"alert": {"reading": "total"}})
    with pytest.raises(ConfigError, match=r"RewardDropAlert: alert\.reading"):
        RewardDropAlert(reading="total")
    with pytest.raises(ConfigError, match=r"alert\.tolerance"):
        RewardDropAlert(tolerance=2)
    first = RewardDropAlert()
    for round_, mean in enumerate(
        [0.5, 0.7, 0.6, 0.45, 0.4, 0.6, 0.7, 0.55, 0.5, 0.65, -0.5, -0.5]
    ):
        first.update(round_, mean)
    resumed = RewardDropAlert()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.update(12, -0.5) and resumed.fired == [12]  # the average and noise resumed
    old = RewardDropAlert(**RAW)  # a state saved before the readings: its last mean
    old.load_state_dict({"last": 1.0, "falls": 0, "fired": [2]})
    assert [old.update(r, v) for r, v in enumerate([0.9, 0.8, 0.7], 3)] == [False, False, True]
    assert old.fired == [2, 5]


def test_a_run_s_schedule_counts_rounds():
    from feedbackgym.training.common.arms import arm_config

    with pytest.raises(ConfigError, match="rounds"):
        arm_config("guide", merge_config(FeedbackConfig(), {"schedule": {"unit": "steps"}}), 10)


def test_a_resumed_controller_goes_on_from_the_saved_config_version_and_alert(tmp_path):
    path = tmp_path / "feedback.yaml"
    _write(path, "guide: {every: 2}\n")
    first = FeedbackController(path)
    _write(path, "guide: {every: 5}\n")
    first.update(1)
    for round_, mean_return in enumerate([1.0, 0.7, 0.5, 0.3]):
        first.update(round_ + 2, mean_return=mean_return)
    saved = json.loads(json.dumps(first.state_dict()))
    resumed = FeedbackController(path)
    resumed.load_state_dict(saved)
    assert resumed.config_version == 2 and resumed.state.config_version == 2
    assert resumed.config_changes == first.config_changes and resumed.alert_fired
    assert resumed.config.guide.every == 5


RELIANCE = merge_config(CONFIG, {"reliance": {}})  # 0.2 / 0.05, steps of 0.1 within [0.2, 0.9]


def test_the_reliance_rule_raises_lowers_and_clamps_the_dropout():
    from feedbackgym.config import RelianceConfig
    from feedbackgym.control import RelianceRule

    rule = RelianceRule(RelianceConfig(), dropout=0.5)
    assert [rule.observe(r) for r in (0.3, 0.2, 0.05, 0.1)] == [0.6, 0.6, 0.6, 0.6]  # in band
    assert [rule.observe(0.5) for _ in range(4)] == [0.7, 0.8, 0.9, 0.9]  # clamped at the top
    assert rule.observe(float("nan")) == 0.9  # no measure, no move
    assert [rule.observe(-0.1) for _ in range(8)][-2:] == [0.2, 0.2]  # clamped at the bottom
    custom = RelianceConfig(raise_above=0.5, lower_below=0.0, step=0.25, min_dropout=0.0)
    assert RelianceRule(custom, dropout=1.0).dropout == 0.9  # starts inside the bounds
    assert [RelianceRule(custom, dropout=0.5).observe(r) for r in (0.6, -0.2)] == [0.75, 0.25]


def test_reliance_moves_the_dropout_of_every_env_until_the_guide_falls_silent():
    single = feedbackgym.make(ENV, RELIANCE)
    workers = gym.vector.AsyncVectorEnv([lambda: feedbackgym.make(ENV, RELIANCE)] * 2)
    try:
        controller = FeedbackController(RELIANCE, envs=single)
        controller.attach(workers)
        assert controller.update(1).config.guide.dropout == 0.5
        state = controller.report_reliance(0.4)  # leans on the hints: withhold more
        assert state.config.guide.dropout == controller.guide_dropout == 0.6
        assert single.get_wrapper_attr("dropout") == 0.6
        assert workers.get_attr("dropout") == (0.6, 0.6)  # subprocess workers too
        controller.report_reliance(0.0)
        assert controller.update(2).config.guide.dropout == 0.5  # kept by later rounds
        assert workers.get_attr("dropout") == (0.5, 0.5)
        assert controller.update(15).guide_weight == 0  # review: no hints to rely on
        assert controller.report_reliance(0.0).config.guide.dropout == 0.5
    finally:
        workers.close()
    off = FeedbackController(CONFIG)
    assert off.reliance is None and off.report_reliance(0.4).config.guide.dropout == 0.5


def test_a_resumed_controller_keeps_the_dropout_the_reliance_rule_set():
    first = FeedbackController(RELIANCE)
    first.update(1)
    for reliance in (0.3, 0.3, 0.3):
        first.report_reliance(reliance)
    saved = json.loads(json.dumps(first.state_dict()))
    env = feedbackgym.make(ENV, RELIANCE)
    resumed = FeedbackController(RELIANCE, envs=env)
    resumed.load_state_dict(saved)
    assert resumed.guide_dropout == first.guide_dropout == 0.8
    assert resumed.state.config.guide.dropout == env.get_wrapper_attr("dropout") == 0.8
    older = {key: value for key, value in saved.items() if key != "reliance"}
    before_the_rule = FeedbackController(RELIANCE)
    before_the_rule.load_state_dict(older)  # a state.json written before the rule existed
    assert before_the_rule.guide_dropout == 0.5


def test_a_config_edit_of_the_dropout_restarts_the_reliance_rule(tmp_path):
    path = tmp_path / "feedback.yaml"
    _write(path, "guide: {dropout: 0.5}\nreliance: {}\n")
    controller = FeedbackController(path)
    controller.report_reliance(0.3)
    _write(path, "guide: {dropout: 0.5, every: 2}\nreliance: {}\n")
    assert controller.update(1).config.guide.dropout == 0.6  # another field: the rule goes on
    _write(path, "guide: {dropout: 0.3, every: 2}\nreliance: {}\n")
    assert controller.update(2).config.guide.dropout == 0.3


def test_the_alert_channel_sends_each_alert_to_the_webhook():
    import http.server
    import json
    import threading

    from feedbackgym.config import AlertConfig
    from feedbackgym.control import RewardDropAlert
    from feedbackgym.webhook import Webhook

    received = []

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], json.loads(body)))
            self.send_response(200 if len(received) == 1 else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/alerts"
    try:
        hooked = []
        alert = RewardDropAlert(
            lambda r, m: hooked.append(r), config=AlertConfig(webhook=url, smoothing=1.0, noise=0.0)
        )
        channel = Webhook(url, timeout_s=5)
        for round_, mean in enumerate([1.0, 0.9, 0.8, 0.7]):
            alert.update(round_, mean)
        assert alert.fired == [3] and hooked == [3]  # the user's hook still runs
        for _ in range(100):  # the config's channel sends from a thread of its own
            if received:
                break
            threading.Event().wait(0.05)
        channel(4, "second").join()  # the endpoint answers 503 now: a failed send
    finally:
        server.shutdown()
        server.server_close()
    by_round = {body["round"]: (path, kind, body) for path, kind, body in received}
    path, kind, body = by_round[3]
    assert path == "/alerts" and kind == "application/json"
    assert body["kind"] == "reward_drop" and "fell 3 rounds in a row" in body["message"]
    assert sorted(by_round) == [3, 4] and (channel.sent, channel.failed) == (0, 1)
    with pytest.raises(ConfigError, match="alert.webhook"):
        FeedbackConfig.from_mapping({"alert": {"webhook": "ftp://example.org/x"}})
    with pytest.raises(ValueError, match="timeout_s"):
        Webhook(url, timeout_s=0)
