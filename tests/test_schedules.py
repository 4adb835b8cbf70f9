import pickle

import pytest

from feedbackgym.config import FeedbackConfig, arm_suffixes, split_arm
from feedbackgym.schedules import (
    ARMS,
    LLM_ARMS,
    TWO_PHASE_ARMS,
    ConstantSchedule,
    GuideReviewSchedule,
    TrendRule,
    make_schedule,
    schedule_from_config,
)

SPEAKERS = ["sparse", "guide", "review", "guide-then-review", "review-then-guide"]


def test_default_schedule_guides_for_40_percent_then_fades_over_5_rounds():
    s = GuideReviewSchedule(total=100)
    assert s.state(0).phase == "guide" and s.state(39.9).guide_weight == 1.0
    weights = [s.state(r).guide_weight for r in (40, 41, 42, 43, 44, 45)]
    assert weights == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0])
    assert all(
        st.guide_weight + st.review_weight == pytest.approx(1) for st in map(s.state, range(100))
    )
    assert s.state(45).phase == "review" and s.state(99).review_weight == 1.0


def test_reverse_arm_reviews_first():
    s = make_schedule("review-then-guide", total=10, fade=2)
    assert (s.state(0).phase, s.state(0).review_weight) == ("review", 1.0)
    assert s.state(5).phase == "fade" and s.state(9).phase == "guide"


def test_sb3_progress_remaining_and_fractions():
    s = GuideReviewSchedule(switch_at=0.5, fade=0, total=1000, unit="steps")
    assert s(1.0) == 1.0 and s(0.2) == 0.0
    assert s.at_fraction(0.25).guide_weight == 1.0
    assert s.at_remaining(0.0).phase == "review"


@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_is_a_schedule_that_pickles(arm):
    s = make_schedule(arm, total=20)
    clone = pickle.loads(pickle.dumps(s))
    assert repr(clone) == repr(s)
    assert clone.state(3) == s.state(3)


def test_the_arms_are_who_speaks_and_the_exploration_bonus_times_shaping_off_and_on():
    shaped = ["shaping"] + [f"{arm}+shaping" for arm in SPEAKERS[1:]]
    base = [*SPEAKERS, *shaped, "explore", "explore+shaping"]
    assert sorted(a for a in ARMS if not arm_suffixes(a)) == sorted(base)
    guided = [a for a in base if "guide" in a]
    restarts = ("", "+reexplore", "+curriculum")  # restarts replay seeds: no curriculum
    hinted = ("", "+failure-hints")
    suffixed = [f"{a}{more}" for a in base for more in restarts[1:]] + [
        f"{a}{more}{hint}{critic}"
        for a in guided
        for more in restarts
        for hint in hinted
        for critic in ("", "+critic-hints")
        if hint or critic
    ]
    assert sorted(a for a in ARMS if arm_suffixes(a)) == sorted(suffixed)
    assert sorted(TWO_PHASE_ARMS) == sorted({a for a in ARMS + LLM_ARMS if "-then-" in a})
    taught = [a for a in base if a not in ("sparse", "shaping", "explore", "explore+shaping")]
    assert sorted(set(LLM_ARMS) - set(ARMS)) == sorted(
        a + more + "+distill"
        for a in taught
        for more in ("", "+reexplore")
        + (("+failure-hints", "+reexplore+failure-hints") if "guide" in a else ())
    )
    assert not [a for a in LLM_ARMS if "curriculum" in a or "critic-hints" in a]


@pytest.mark.parametrize("arm", [a for a in LLM_ARMS if arm_suffixes(a)])
def test_a_suffix_sets_only_its_own_sections(arm):
    suffixes = arm_suffixes(arm)
    base = arm.removesuffix("".join(suffixes))
    config, plain = FeedbackConfig.for_arm(arm), FeedbackConfig.for_arm(base)
    assert split_arm(arm) == split_arm(base) and config.schedule.arm == arm
    assert (config.reexplore is not None) == ("+reexplore" in suffixes)
    assert (config.guide.when == "after-failure") == ("+failure-hints" in suffixes)
    changed = {name for name, section in config if section != getattr(plain, name)}
    assert changed <= {"schedule", "reexplore", "guide"}


@pytest.mark.parametrize("arm", [a for a in ARMS if not arm_suffixes(a)])
def test_an_arm_shapes_exactly_when_named_so_and_shaping_leaves_its_schedule_alone(arm):
    config = FeedbackConfig.for_arm(arm)
    named_shaped = arm.endswith("+shaping") or arm == "shaping"
    assert config.schedule.arm == arm
    assert (config.shaping.scale == 0) != named_shaped
    assert (config.explore is not None) == arm.startswith("explore")
    plain = "sparse" if arm == "shaping" else arm.removesuffix("+shaping")
    kwargs = {"total": 20, "fade": 2, "adaptive": TrendRule()}
    assert repr(make_schedule(arm, **kwargs)) == repr(make_schedule(plain, **kwargs))
    plain_config = FeedbackConfig.for_arm(plain)
    assert {name for name, section in config if section != getattr(plain_config, name)} <= {
        "schedule",
        "shaping",
    }
    assert config.schedule.model_copy(update={"arm": plain}) == plain_config.schedule
    schedules = [schedule_from_config(c.schedule) for c in (config, plain_config)]
    assert repr(schedules[0]) == repr(schedules[1])
    assert (arm in TWO_PHASE_ARMS) == (plain in TWO_PHASE_ARMS)


def test_constant_arms():
    assert make_schedule("sparse").state(5).phase == "none"
    assert make_schedule("guide").state(99).guide_weight == 1.0
    assert make_schedule("review").state(0).review_weight == 1.0
    with pytest.raises(ValueError, match="guide_weight"):
        ConstantSchedule(1.5, 0)
    with pytest.raises(ValueError, match="unknown arm"):
        make_schedule("teacher")


def _drive(schedule, losses):
    for round_, loss in enumerate(losses):
        schedule.report(round_, loss=loss)
    return schedule.switch_at


def test_flat_loss_switches_sooner_and_falling_loss_stays_longer():
    flat = GuideReviewSchedule(total=100, adaptive=TrendRule("loss", window=10, min_success=0.0))
    assert _drive(flat, [1.0] * 10) == pytest.approx(0.35)
    falling = GuideReviewSchedule(total=100, adaptive=TrendRule("loss", window=10, min_success=0.0))
    assert _drive(falling, [1.0 * 0.97**i for i in range(10)]) == pytest.approx(0.45)
    middle = GuideReviewSchedule(total=100, adaptive=TrendRule("loss", window=10, min_success=0.0))
    assert _drive(middle, [1.0 - 0.006 * i for i in range(10)]) == pytest.approx(0.4)
    assert "switch sooner" in flat.history[0]["reason"]


def test_switch_stays_in_bounds_and_not_before_now():
    s = GuideReviewSchedule(
        total=100,
        adaptive=TrendRule(
            "loss", window=2, shift=0.3, min_switch=0.2, max_switch=0.6, min_success=0
        ),
    )
    for _ in range(10):
        s.report(5, loss=1.0)
    assert s.switch_at == pytest.approx(0.2)
    s2 = GuideReviewSchedule(
        total=100, adaptive=TrendRule("loss", window=2, shift=0.3, max_switch=0.6, min_success=0)
    )
    for i in range(10):
        s2.report(1, loss=0.5**i)
    assert s2.switch_at == pytest.approx(0.6)
    s3 = GuideReviewSchedule(
        total=100, adaptive=TrendRule("loss", window=2, shift=0.3, min_success=0)
    )
    for _ in range(4):
        s3.report(30, loss=1.0)
    assert s3.switch_at == pytest.approx(0.3)


def test_return_trend_variant():
    s = GuideReviewSchedule(total=100, adaptive=TrendRule("return", window=4))
    for i, value in enumerate([0.1, 0.2, 0.4, 0.8]):
        s.report(i, mean_return=value)
    assert s.switch_at == pytest.approx(0.45)
    s.report(5, loss=1.0)  # a loss report does not feed a return rule
    assert s.switch_at == pytest.approx(0.45)


def test_success_floor_holds_the_guide_until_reached_or_max_switch():
    s = GuideReviewSchedule(
        switch_at=0.2, total=100, adaptive=TrendRule("return", window=4, min_success=0.3)
    )
    for round_ in range(40):  # flat return (switch sooner) but no success yet: hold
        s.report(round_, mean_return=0.0, success=0.1)
        assert s.state(round_ + 1).phase == "guide"
    holds = [h for h in s.history if "floor" in h["reason"]]
    assert len(holds) == 1 and holds[0]["to"] == pytest.approx(0.41)  # one entry per hold
    s.report(40, mean_return=0.0, success=0.5)  # floor reached: the held switch comes now
    assert s.switch_at == pytest.approx(0.41) and s.state(41).phase == "fade"
    capped = GuideReviewSchedule(
        total=10, adaptive=TrendRule("return", max_switch=0.5, min_success=0.9)
    )
    for round_ in range(10):
        capped.report(round_, success=0.0)
    assert capped.switch_at == pytest.approx(0.5) and capped.state(6).phase != "guide"
    late = GuideReviewSchedule(  # a switch set past max_switch is never pulled earlier
        switch_at=0.9, total=10, adaptive=TrendRule("return", max_switch=0.8, min_success=0.9)
    )
    for round_ in range(9):
        late.report(round_, success=0.0)
    assert late.switch_at == pytest.approx(0.9)
    reverse = GuideReviewSchedule(  # the floor holds the guide, never the first reviews
        switch_at=0.2, total=10, reverse=True, adaptive=TrendRule("return", min_success=0.9)
    )
    for round_ in range(5):
        reverse.report(round_, success=0.0)
    assert reverse.switch_at == pytest.approx(0.2) and not reverse.history
    with pytest.raises(ValueError, match="min_success"):
        TrendRule(min_success=1.5)


def test_in_steps_the_floor_holds_the_guide_by_the_spacing_of_reports():
    s = GuideReviewSchedule(
        switch_at=0.2, total=1000, unit="steps", adaptive=TrendRule("return", min_success=0.5)
    )
    for progress in (0, 100):  # reports a round (100 steps) apart, success under the floor
        s.report(progress, success=0.0)
    assert s.switch_at == pytest.approx(0.3)  # held to the round after next: 100 + 2 x 100
    assert s.state(200).phase == "guide"


@pytest.mark.parametrize(
    "kwargs", [{"switch_at": 1.5}, {"fade": -1}, {"total": 0}, {"unit": "epochs"}]
)
def test_bad_schedule_arguments(kwargs):
    with pytest.raises(ValueError):
        GuideReviewSchedule(**kwargs)


def test_bad_trend_rules():
    with pytest.raises(ValueError, match="metric"):
        TrendRule("accuracy")
    with pytest.raises(ValueError):
        TrendRule(sooner_below=0.1, later_above=0.05)
