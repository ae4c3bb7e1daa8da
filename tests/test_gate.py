"""The LLM gate (:mod:`opencode_memoryd.capture.gate`) driven by a fake clock: its
decisions (waits, delays, pauses, holds) and the events it queues, with no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from opencode_memoryd.capture.gate import DISK_FULL_RETRY, GateSettings, LlmGate

START = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def gate(clock: FakeClock, *, budget: int = 0, enabled: bool = True,
         threshold: int = 3) -> LlmGate:
    return LlmGate(GateSettings(daily_token_budget=budget, auth_pause_seconds=600.0,
                                circuit_failure_threshold=threshold,
                                circuit_cooldown_seconds=120.0),
                   enabled=enabled, clock=clock)


def no_tokens(_since: datetime) -> int:
    return 0


def test_a_refused_key_pauses_llm_work_until_the_pause_ends() -> None:
    clock = FakeClock()
    g = gate(clock)
    assert g.wait(no_tokens) is None
    assert g.refused("401 Unauthorized") == 600.0
    assert g.status() == {"reason": g.reason, "until": "2026-03-01T22:10:00.000Z"}
    assert "401 Unauthorized" in g.reason
    assert [(e.level, e.name) for e in g.drain()] == [("error", "llm_paused")]
    clock.advance(200)
    assert g.wait(no_tokens) == 400.0
    clock.advance(400)
    assert g.wait(no_tokens) is None
    assert g.status() is None and g.reason == ""
    assert [e.name for e in g.drain()] == ["llm_pause_over"]
    assert g.drain() == []


def test_the_breaker_opens_after_the_threshold_and_a_success_resets_its_count() -> None:
    clock = FakeClock()
    g = gate(clock, threshold=3)
    assert g.failed("timeout", attempts=1) == 5.0
    assert g.failed("timeout", attempts=2) == 10.0
    g.succeeded()  # the count starts over
    assert g.failed("timeout", attempts=1) == 5.0
    assert g.failed("timeout", attempts=2) == 10.0
    assert g.pause is None and g.wait(no_tokens) is None
    # the third in a row opens the circuit: the session waits for the cooldown
    assert g.failed("503", attempts=3) == 120.0
    assert g.reason == "circuit open after 3 consecutive failures (last: 503)"
    assert [e.name for e in g.drain()] == ["circuit_open"]
    assert g.wait(no_tokens) == 120.0
    clock.advance(120)
    assert g.wait(no_tokens) is None


def test_a_retry_after_longer_than_the_backoff_is_honoured() -> None:
    g = gate(FakeClock())
    assert g.failed("429", attempts=1, retry_after=42.0) == 42.0


def test_the_daily_budget_pauses_until_the_next_utc_midnight() -> None:
    clock = FakeClock()
    asked: list[datetime] = []

    def spent(since: datetime) -> int:
        asked.append(since)
        return 1000

    g = gate(clock, budget=1000)
    assert g.wait(spent) == 2 * 3600.0  # 22:00 -> midnight
    assert asked == [datetime(2026, 3, 1, tzinfo=UTC)]
    assert g.reason == "daily token budget of 1000 reached"
    assert [(e.name, e.fields["until"]) for e in g.drain()] == [
        ("token_budget_reached", "2026-03-02T00:00:00.000Z")]
    clock.advance(3600)
    assert g.wait(spent) == 3600.0 and len(asked) == 1  # paused: not asked again
    clock.advance(3600)
    assert g.wait(no_tokens) is None  # a new day, nothing spent yet


def test_under_the_budget_llm_work_runs() -> None:
    g = gate(FakeClock(), budget=1000)
    assert g.wait(lambda _since: 999) is None and g.pause is None


def test_rules_mode_is_never_paused_nor_asks_for_tokens() -> None:
    g = gate(FakeClock(), budget=1, enabled=False)

    def spent(_since: datetime) -> int:
        raise AssertionError("rules mode spends no tokens")

    assert g.wait(spent) is None


def test_a_disk_full_hold_ends_after_its_retry_time() -> None:
    clock = FakeClock()
    g = gate(clock)
    assert g.next_release_ms() is None
    g.hold(("src", "s1"))
    clock.advance(10)
    g.hold(("src", "s2"))
    assert g.is_held(("src", "s1")) and g.held_count == 2
    assert g.next_release_ms() == int((START.timestamp() + DISK_FULL_RETRY) * 1000)
    clock.advance(DISK_FULL_RETRY - 10)
    g.release_due()
    assert not g.is_held(("src", "s1")) and g.is_held(("src", "s2"))
    clock.advance(10)
    g.release_due()
    assert g.held_count == 0 and g.next_release_ms() is None


@pytest.mark.parametrize("attempts,expected", [(1, 5.0), (4, 40.0), (20, 900.0)])
def test_the_backoff_grows_and_is_capped(attempts: int, expected: float) -> None:
    g = gate(FakeClock(), threshold=100)
    assert g.failed("timeout", attempts=attempts) == expected
