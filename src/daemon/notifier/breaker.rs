//! The per-target circuit breaker (docs/design.md#notifier-breaker), as a pure state machine (time is passed in):
//!
//! - when a target gives up on a retryable error, its breaker opens for the cooldown;
//! - while it is open, each new alert gets exactly one attempt, without backoff: a 2xx
//!   closes it, a retryable failure marks the alert failed and keeps it open for another
//!   cooldown;
//! - a permanent error (other 4xx, 3xx) neither opens nor closes it;
//! - when the cooldown passes with no new alert, it closes, and the next alert gets the
//!   full ladder again;
//! - the state is in memory: a restart starts every target closed.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open { until: Instant },
}

/// How a new alert is delivered to a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Retries with backoff, up to max_attempts.
    FullLadder,
    /// Exactly one attempt, no backoff; a retryable failure fails the delivery.
    SingleAttempt,
}

/// How a target's delivery of one alert ended, as far as the breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A 2xx.
    Delivered,
    /// The delivery failed on a retryable error: the ladder ran out, or the single attempt
    /// of an open breaker failed.
    GaveUpRetryable,
    /// A permanent error (other 4xx, 3xx).
    Permanent,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    cooldown: Duration,
    state: BreakerState,
}

impl Breaker {
    pub fn new(cooldown: Duration) -> Breaker {
        Breaker { cooldown, state: BreakerState::Closed }
    }

    /// The state at `now`: an open breaker whose cooldown has passed is closed.
    pub fn state(&mut self, now: Instant) -> BreakerState {
        if let BreakerState::Open { until } = self.state {
            if now >= until {
                self.state = BreakerState::Closed;
            }
        }
        self.state
    }

    pub fn is_open(&mut self, now: Instant) -> bool {
        matches!(self.state(now), BreakerState::Open { .. })
    }

    /// How a new alert read at `now` is delivered.
    pub fn mode(&mut self, now: Instant) -> Mode {
        if self.is_open(now) {
            Mode::SingleAttempt
        } else {
            Mode::FullLadder
        }
    }

    /// Records how a delivery ended, at `now`.
    pub fn record(&mut self, event: Event, now: Instant) {
        match event {
            Event::Delivered => self.state = BreakerState::Closed,
            Event::GaveUpRetryable => self.state = BreakerState::Open { until: now + self.cooldown },
            Event::Permanent => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_secs(300);

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn starts_closed_with_the_full_ladder() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        assert_eq!(b.state(t0), BreakerState::Closed);
        assert_eq!(b.mode(t0), Mode::FullLadder);
    }

    #[test]
    fn giving_up_on_a_retryable_error_opens_for_the_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        b.record(Event::GaveUpRetryable, at(t0, 127));
        assert_eq!(b.state(at(t0, 127)), BreakerState::Open { until: at(t0, 427) });
        assert_eq!(b.mode(at(t0, 200)), Mode::SingleAttempt);
        assert_eq!(b.mode(at(t0, 426)), Mode::SingleAttempt);
    }

    #[test]
    fn a_2xx_while_open_closes_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        b.record(Event::GaveUpRetryable, t0);
        assert_eq!(b.mode(at(t0, 10)), Mode::SingleAttempt);
        b.record(Event::Delivered, at(t0, 10));
        assert_eq!(b.mode(at(t0, 11)), Mode::FullLadder);
    }

    #[test]
    fn a_retryable_failure_while_open_keeps_it_open_another_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        b.record(Event::GaveUpRetryable, t0);
        assert_eq!(b.mode(at(t0, 250)), Mode::SingleAttempt);
        b.record(Event::GaveUpRetryable, at(t0, 250));
        // Past the first cooldown, still open: the second one runs from 250 s.
        assert_eq!(b.mode(at(t0, 400)), Mode::SingleAttempt);
        assert_eq!(b.state(at(t0, 400)), BreakerState::Open { until: at(t0, 550) });
        assert_eq!(b.mode(at(t0, 550)), Mode::FullLadder);
    }

    #[test]
    fn a_permanent_error_neither_opens_nor_closes() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        b.record(Event::Permanent, t0);
        assert_eq!(b.state(t0), BreakerState::Closed);
        b.record(Event::GaveUpRetryable, t0);
        b.record(Event::Permanent, at(t0, 100));
        assert_eq!(b.state(at(t0, 100)), BreakerState::Open { until: at(t0, 300) });
    }

    #[test]
    fn the_cooldown_passing_with_no_alert_closes_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(COOLDOWN);
        b.record(Event::GaveUpRetryable, t0);
        assert!(b.is_open(at(t0, 299)));
        assert!(!b.is_open(at(t0, 300)));
        // Closed for good: the next alert gets the full ladder again.
        assert_eq!(b.mode(at(t0, 301)), Mode::FullLadder);
        assert_eq!(b.state(at(t0, 301)), BreakerState::Closed);
    }
}
