"""The refresh policy as a state machine: hard limits are never bypassed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from attrs import evolve
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clanker.usage.policy import MANUAL_REFRESH_FLOOR, ProbeState, RefreshPolicy, decide

START = datetime(2026, 11, 30, tzinfo=UTC)
policies = st.builds(
    RefreshPolicy,
    cache_ttl=st.integers(0, 600).map(lambda s: timedelta(seconds=s)),
    minimum_interval=st.integers(0, 300).map(lambda s: timedelta(seconds=s)),
    failure_backoff=st.integers(0, 600).map(lambda s: timedelta(seconds=s)),
)


class RefreshMachine(RuleBasedStateMachine):
    """Reads (ordinary or forced) against a clock; each allowed probe succeeds or fails."""

    def __init__(self) -> None:
        super().__init__()
        self.policy: RefreshPolicy | None = None
        self.now = START
        self.state = ProbeState()
        self.probes: list[datetime] = []
        self.failures: list[datetime] = []
        self.retry_until: datetime | None = None
        self.has_reading = False
        self.reading_lost = False

    @precondition(lambda self: self.policy is None)
    @rule(policy=policies)
    def choose_policy(self, policy: RefreshPolicy) -> None:
        self.policy = policy

    @precondition(lambda self: self.policy is not None)
    @rule(seconds=st.integers(0, 900))
    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @precondition(lambda self: self.policy is not None)
    @rule(force=st.booleans(), outcome=st.sampled_from(["ok", "fail", "retry-after"]),
          retry=st.integers(1, 3600))
    def read(self, force: bool, outcome: str, retry: int) -> None:
        assert self.policy is not None
        decision = decide(self.state, self.policy, self.now, force=force)
        if not decision.probe:
            return
        # The hard limits, checked against the machine's own history:
        if self.probes:
            assert self.now - self.probes[-1] >= self.policy.minimum_interval
            if force:
                assert self.now - self.probes[-1] >= MANUAL_REFRESH_FLOOR
        if self.failures and self.state.last_failure_at is not None:
            assert self.now - self.failures[-1] >= self.policy.failure_backoff
        if self.retry_until is not None:
            assert self.now >= self.retry_until
        self.probes.append(self.now)
        state = evolve(self.state, last_probe_at=self.now)
        if outcome == "ok":
            self.state = evolve(state, last_success_at=self.now, last_failure_at=None,
                                retry_after_until=None)
            self.has_reading = True
            self.retry_until = None
        else:
            until = self.now + timedelta(seconds=retry) if outcome == "retry-after" else None
            self.state = evolve(state, last_failure_at=self.now, retry_after_until=until)
            self.failures.append(self.now)
            self.retry_until = until
            # the service keeps the last snapshot on failure: the model does the same

    @invariant()
    def an_ordinary_read_of_a_fresh_reading_never_probes(self) -> None:
        if self.policy is None or self.state.last_success_at is None:
            return
        if self.now < self.state.last_success_at + self.policy.cache_ttl:
            assert not decide(self.state, self.policy, self.now, force=False).probe


TestRefreshPolicy = RefreshMachine.TestCase
TestRefreshPolicy.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)


def test_force_bypasses_the_cache_but_not_the_floor() -> None:
    policy = RefreshPolicy(cache_ttl=timedelta(minutes=5))
    state = ProbeState(last_probe_at=START, last_success_at=START)
    assert not decide(state, policy, START + timedelta(seconds=5), force=True).probe
    assert decide(state, policy, START + timedelta(seconds=11), force=True).probe
    assert not decide(state, policy, START + timedelta(seconds=11), force=False).probe


def test_next_and_refreshable_times() -> None:
    policy = RefreshPolicy(cache_ttl=timedelta(seconds=60), minimum_interval=timedelta(seconds=60),
                           failure_backoff=timedelta(seconds=120))
    failed = ProbeState(last_probe_at=START, last_failure_at=START + timedelta(seconds=2))
    decision = decide(failed, policy, START + timedelta(seconds=30), force=True)
    assert not decision.probe
    assert decision.refreshable_at == START + timedelta(seconds=122)
