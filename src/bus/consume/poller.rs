//! A member's poller: a thread of its own that polls the consumer and hands each record to
//! the loop through a bounded channel.
//!
//! Why a thread: librdkafka calls the rebalance hooks from inside `poll`, and a revoke must
//! wait there until the loop has stored and committed ([`super::rebalance`]); a hook that
//! waits must not sit on an async worker, nor inside the loop it waits for. Polling apart
//! from the loop also keeps the member in its group while the loop is busy or holds back
//! (ClickHouse down): while the channel is full the poller goes on polling between waits,
//! which serves rebalances, and once it holds a bounded number of records it pauses the
//! assigned partitions, so nothing more is fetched.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::message::OwnedMessage;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{channel, Receiver, Sender};

use super::rebalance::MemberConsumer;

/// Records polled and not yet taken by the loop: enough for the poller to stay ahead of a
/// loop that takes them in bursts.
const CHANNEL_RECORDS: usize = 256;
/// When the channel is full, the poller waits until this many records fit before it hands
/// more over: one wake of the poller per batch of records, not per record.
const HANDOVER: usize = 64;
/// Records the poller holds while the loop takes none; past it the partitions are paused,
/// so a loop that holds back (ClickHouse down) costs no more memory than this and the
/// channel. Below it nothing is paused: a pause drops what the consumer had fetched, and a
/// loop that is merely busy (an insert in flight) would pay a fetch again for every batch.
const HELD_RECORDS: usize = 256;
/// Longest single poll, and longest wait for room in the channel: bounds how late a stop
/// is noticed and how often a waiting poller serves the group's callbacks.
const POLL_SLICE: Duration = Duration::from_millis(100);
/// The pause after a consume error: the broker's errors repeat until it is back.
const ERROR_PAUSE: Duration = Duration::from_millis(500);

/// A record, with the count of revokes reported before it was polled
/// ([`super::rebalance::MemberContext::revokes`]).
pub struct Polled {
    pub record: OwnedMessage,
    pub revokes_before: u64,
}

/// The poller thread of one member. Dropping it stops the thread (within a poll slice).
pub struct Poller {
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    /// Starts polling `consumer` on a thread named after the member's service.
    pub fn start(
        consumer: Arc<MemberConsumer>,
        topic: String,
        service: &str,
    ) -> std::io::Result<(Poller, Receiver<Polled>)> {
        let (records, received) = channel(CHANNEL_RECORDS);
        let running = Arc::new(AtomicBool::new(true));
        let runtime = tokio::runtime::Handle::current();
        let thread = {
            let running = running.clone();
            std::thread::Builder::new()
                .name(format!("tayga-{service}-poll"))
                .spawn(move || poll_until_stopped(&consumer, &topic, &records, &running, &runtime))?
        };
        Ok((Poller { running, thread: Some(thread) }, received))
    }

    /// Stops the thread and waits for it (blocks: call it off the async workers).
    pub fn stop(mut self) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
    }
}

fn poll_until_stopped(
    consumer: &MemberConsumer,
    topic: &str,
    records: &Sender<Polled>,
    running: &AtomicBool,
    runtime: &tokio::runtime::Handle,
) {
    // Polled, waiting for room in the channel, oldest first.
    let mut held: VecDeque<Polled> = VecDeque::new();
    let mut paused = false;
    while running.load(Ordering::SeqCst) {
        while let Some(polled) = held.pop_front() {
            match records.try_send(polled) {
                Ok(()) => {}
                Err(TrySendError::Full(polled)) => {
                    held.push_front(polled);
                    break;
                }
                // The loop is gone.
                Err(TrySendError::Closed(_)) => return,
            }
        }
        if held.is_empty() {
            if paused {
                if let Ok(assignment) = consumer.assignment() {
                    let _ = consumer.resume(&assignment);
                }
                paused = false;
            }
            poll_once(consumer, topic, POLL_SLICE, &mut held);
            continue;
        }
        // The loop is behind: wait (a slice at most) for room for a batch of what waits.
        let wanted = HANDOVER.min(held.len());
        let room = runtime.block_on(async { tokio::time::timeout(POLL_SLICE, records.reserve_many(wanted)).await });
        match room {
            Ok(Ok(permits)) => {
                for permit in permits {
                    permit.send(held.pop_front().expect("no more permits than held records"));
                }
            }
            Ok(Err(_)) => return,
            Err(_elapsed) => {
                if held.len() >= HELD_RECORDS {
                    // Paused again each time: a rebalance may have assigned new partitions.
                    if let Ok(assignment) = consumer.assignment() {
                        let _ = consumer.pause(&assignment);
                    }
                    paused = true;
                }
                // Serves the group's callbacks, and keeps the member in its group.
                poll_once(consumer, topic, Duration::ZERO, &mut held);
            }
        }
    }
}

/// One poll: serves the rebalance hooks, and keeps the record it returns.
fn poll_once(consumer: &MemberConsumer, topic: &str, timeout: Duration, held: &mut VecDeque<Polled>) {
    match consumer.poll(timeout) {
        Some(Ok(message)) => {
            // Read after the poll: a revoke reported inside it came before this record.
            let revokes_before = consumer.context().revokes();
            held.push_back(Polled { record: message.detach(), revokes_before });
        }
        Some(Err(e)) => {
            consumer.context().metrics().consume_error(topic, &e);
            std::thread::sleep(ERROR_PAUSE);
        }
        None => {}
    }
}
