//! The one consume loop of every consuming daemon. The loop owns the order of things: it
//! waits for the next rebalance, record, the daemon's tick or the stop (the stop first when
//! several are ready, then a rebalance; a wake the daemon asked for is a tick), applies the
//! group's rebalances before any record or tick, drops records of partitions it no longer
//! holds, refreshes the lag off the loop, and at the end leaves the group. The daemon is a
//! [`Handler`]: what a record, a tick, an assignment, a revoke and the stop mean to it, and
//! nothing of the loop.

use std::future::Future;
use std::ops::ControlFlow;
use std::time::Duration;

use rdkafka::message::OwnedMessage;

use super::member::Next;
use super::rebalance::{Change, Rebalanced};
use super::Member;

/// A consuming daemon's own work, driven by [`run`]. Every method gets the [`Member`], to
/// commit what is stored, publish, and see its partitions.
///
/// Offsets are committed only by the handler, and only after what their records carry is
/// stored: the loop commits nothing by itself.
pub trait Handler: Send {
    /// How often [`Handler::tick`] runs (the first tick comes at once).
    fn tick_every(&self) -> Duration;

    /// When the loop should run [`Handler::tick`] before the next periodic one, if ever: a
    /// daemon with work that should not wait for the period (a detection pass a mined
    /// record asked for) names the instant here.
    fn wake_at(&self) -> Option<tokio::time::Instant> {
        None
    }

    /// Whether the loop should read records now. A daemon that holds too much unstored
    /// work says no, and the loop only ticks until it says yes.
    fn wants_records(&self) -> bool {
        true
    }

    /// Whether a stop cuts short the call under way. A daemon whose every step can be
    /// abandoned without loss (its rows leave memory only once stored) says yes, so the
    /// stop begins at once even while ClickHouse hangs; the others finish the call first.
    fn gives_way_to_stop(&self) -> bool {
        false
    }

    /// A record of a partition this member holds. `Break` ends the loop (the record is not
    /// done: its offset stays uncommitted).
    fn record(&mut self, member: &mut Member, record: OwnedMessage) -> impl Future<Output = ControlFlow<()>> + Send;

    /// The periodic work (closing, storing, committing, gauges).
    fn tick(&mut self, member: &mut Member) -> impl Future<Output = ()> + Send;

    /// Partitions the group assigned, already noted by the member.
    fn assigned(&mut self, member: &mut Member, partitions: &[i32]) -> impl Future<Output = ()> + Send;

    /// Partitions the group revoked, still held while this runs: the group waits (up to
    /// its `max.poll.interval.ms`) for the handler to store and commit them. The
    /// member forgets them and their commit points afterwards.
    fn revoked(&mut self, member: &mut Member, partitions: &[i32]) -> impl Future<Output = ()> + Send;

    /// The clean stop, within the daemon's bounds, before the member leaves the group.
    fn stop(&mut self, member: &mut Member) -> impl Future<Output = ()> + Send;
}

/// Runs `handler` on `member` until `stop` resolves, then runs its [`Handler::stop`] and
/// leaves the group.
pub async fn run<H: Handler>(mut member: Member, mut handler: H, stop: impl Future<Output = ()> + Send) {
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(handler.tick_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let reading = handler.wants_records();
        let wake = handler.wake_at();
        let woke = tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = tick.tick() => None,
            _ = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => None,
            next = member.next(reading) => Some(next),
        };
        let gives_way = handler.gives_way_to_stop();
        let work = step(&mut member, &mut handler, woke);
        let flow = if gives_way {
            tokio::select! {
                biased;
                _ = &mut stop => break,
                flow = work => flow,
            }
        } else {
            work.await
        };
        if flow.is_break() {
            break;
        }
    }
    handler.stop(&mut member).await;
    member.leave().await;
}

/// One turn of the loop: a rebalance, or the rebalances reported meanwhile and then the
/// record or (`None`) the tick.
async fn step<H: Handler>(member: &mut Member, handler: &mut H, woke: Option<Next>) -> ControlFlow<()> {
    let polled = match woke {
        Some(Next::Rebalance(change)) => {
            apply(member, handler, change).await;
            return ControlFlow::Continue(());
        }
        Some(Next::Record(polled)) => Some(polled),
        None => None,
    };
    apply_rebalances(member, handler).await;
    match polled {
        None => {
            handler.tick(member).await;
            member.refresh_lag();
            ControlFlow::Continue(())
        }
        // Read before a revoke the loop has applied: its next owner reads it.
        Some(polled) if !member.holds(&polled) => ControlFlow::Continue(()),
        Some(polled) => {
            member.metrics().consumed();
            handler.record(member, polled.record).await
        }
    }
}

/// Applies the rebalances the group reported, in order. The loop calls it before every
/// record and tick; a handler calls it from its stop, within its own bound.
pub async fn apply_rebalances<H: Handler>(member: &mut Member, handler: &mut H) {
    for change in member.take_rebalances() {
        apply(member, handler, change).await;
    }
}

/// Applies one change; a revoke's hook returns once it is applied.
async fn apply<H: Handler>(member: &mut Member, handler: &mut H, change: Change) {
    match &change.rebalanced {
        Rebalanced::Assigned(partitions) => {
            member.note(&change.rebalanced);
            handler.assigned(member, partitions).await;
        }
        Rebalanced::Revoked(partitions) => {
            handler.revoked(member, partitions).await;
            member.note(&change.rebalanced);
        }
    }
    change.done();
}
