//! The wait at the top of every async consumer loop: the next record, the daemon's tick,
//! or the stop, whichever comes first; a consume error is reported and waited out here.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::message::{BorrowedMessage, OwnedMessage};

use super::LoggedConsumer;

/// The pause after a consume error: the broker's errors repeat until it is back, and the
/// loop must not spin on them.
const ERROR_PAUSE: Duration = Duration::from_millis(500);

pub enum Polled {
    Record(OwnedMessage),
    /// The tick is due: the daemon's periodic work (closing, flushing, committing).
    Tick,
    Stopped,
}

pub struct Poller {
    consumer: Arc<LoggedConsumer>,
    topic: String,
    tick: tokio::time::Interval,
}

impl Poller {
    pub fn new(consumer: &Arc<LoggedConsumer>, topic: &str, tick_every: Duration) -> Poller {
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Poller { consumer: consumer.clone(), topic: topic.to_string(), tick }
    }

    /// Waits for the next record, tick or `stop`; the stop wins when several are ready.
    pub async fn next(&mut self, stop: impl Future<Output = ()>) -> Polled {
        tokio::pin!(stop);
        loop {
            let polled = tokio::select! {
                biased;
                _ = &mut stop => return Polled::Stopped,
                _ = self.tick.tick() => return Polled::Tick,
                polled = self.consumer.recv() => polled.map(|m: BorrowedMessage<'_>| m.detach()),
            };
            match polled {
                Ok(message) => return Polled::Record(message),
                Err(e) => {
                    self.consumer.context().metrics().consume_error(&self.topic, &e);
                    tokio::select! {
                        _ = &mut stop => return Polled::Stopped,
                        _ = tokio::time::sleep(ERROR_PAUSE) => {}
                    }
                }
            }
        }
    }
}
