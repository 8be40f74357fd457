//! A file of log lines read and masked for one miner, on two threads: the lines of any
//! `Read` in batches, in input order, each batch masked by the reader's thread or left raw
//! for the miner's, whichever is free (see [`Batches`]). The reading is the caller's
//! input; what is mined does not depend on who masked a line. Used by `tayga mine`.

use super::masking::Masker;
use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Lines per batch: large enough that handing one over costs nothing per line, small
/// enough that both threads start at once and that the last batch, which the miner may
/// be left to mask alone, is a small part of a file.
const BATCH_LINES: usize = 1024;

/// Batches read ahead of the miner, at most: they are the work the two threads share.
const READ_AHEAD: u64 = 8;

/// Bytes read at a time.
const READ_BYTES: usize = 1 << 20;

/// Lines, end to end in one string: masked, or raw for the miner's thread to mask.
#[derive(Default)]
pub struct Batch {
    pub text: String,
    /// Where each line ends in `text`.
    pub ends: Vec<usize>,
    /// Whether `text` holds the lines masked, or raw for the caller to mask.
    pub masked: bool,
}

/// What the reader and the miner share: batches read and not yet taken by the miner,
/// numbered in the order of the input.
#[derive(Default)]
struct Queue {
    /// Not masked and not being masked, oldest first.
    raw: VecDeque<(u64, Batch)>,
    /// Masked by the reader, in no order.
    masked: Vec<(u64, Batch)>,
    /// Batches read so far, and taken by the miner.
    read: u64,
    taken: u64,
    /// The reader has stopped: no more batches will come.
    finished: bool,
    /// The miner has stopped taking batches.
    closed: bool,
    /// Batches to reuse.
    spare: Vec<Batch>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic on the other side is reported by its `join`; the queue itself is
        // always consistent between two statements.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        self.changed.wait(q).unwrap_or_else(PoisonError::into_inner)
    }
}

/// The miner's end: batches in the order of the input, masked or raw.
///
/// The two threads share the masking batch by batch, so neither waits for the other
/// whatever each side costs on the input and machine at hand (a fixed share left one
/// idle): the reader reads up to [`READ_AHEAD`] batches ahead, and otherwise masks the
/// newest unmasked batch, always leaving the oldest, which the miner takes next and masks
/// itself when it gets there first. So the miner waits for a batch being masked only
/// once it has caught up with the reader. Masking is pure: who masks a line changes
/// nothing mined.
pub struct Batches {
    shared: Arc<Shared>,
}

impl Iterator for Batches {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        let mut q = self.shared.lock();
        loop {
            // The next batch in input order is the one after those taken.
            let n = q.taken;
            let found = match q.masked.iter().position(|(m, _)| *m == n) {
                Some(i) => Some(q.masked.swap_remove(i).1),
                None if q.raw.front().is_some_and(|(m, _)| *m == n) => q.raw.pop_front().map(|(_, b)| b),
                // Nothing is in flight once the reader has stopped: a batch it took and
                // did not hand back (it failed or panicked) is reported by its `join`.
                None if q.finished => return None,
                None => None,
            };
            if let Some(batch) = found {
                q.taken += 1;
                self.shared.changed.notify_all();
                return Some(batch);
            }
            q = self.shared.wait(q);
        }
    }
}

impl Batches {
    /// Hands a batch back for the reader to fill again.
    pub fn recycle(&self, batch: Batch) {
        self.shared.lock().spare.push(batch);
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
    }
}

/// Tells the miner the reader has stopped, however it stops (a panic included).
struct Finished(Arc<Shared>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.lock().finished = true;
        self.0.changed.notify_all();
    }
}

/// Starts the reader thread (see [`Batches`]).
pub fn spawn_reader(
    input: Box<dyn Read + Send>,
    masker: Masker,
    mut progress: impl FnMut(u64) + Send + 'static,
) -> (Batches, std::thread::JoinHandle<io::Result<()>>) {
    let shared = Arc::new(Shared::default());
    let finished = Finished(shared.clone());
    let handle = std::thread::spawn(move || -> io::Result<()> {
        let shared = &finished.0;
        let mut lines = LineReader::new(input);
        let mut scratch = String::new();
        loop {
            let job = {
                let mut q = shared.lock();
                loop {
                    if q.closed {
                        return Ok(());
                    }
                    if !lines.done() && q.read - q.taken < READ_AHEAD {
                        break Job::Read(q.spare.pop().unwrap_or_default());
                    }
                    if q.raw.len() >= 2 {
                        let (n, batch) = q.raw.pop_back().expect("two batches");
                        break Job::Mask(n, batch);
                    }
                    if lines.done() {
                        return Ok(());
                    }
                    q = shared.wait(q);
                }
            };
            match job {
                Job::Read(mut batch) => {
                    lines.fill(&mut batch)?;
                    progress(lines.bytes_read);
                    let mut q = shared.lock();
                    if batch.ends.is_empty() {
                        q.spare.push(batch);
                    } else {
                        let n = q.read;
                        q.raw.push_back((n, batch));
                        q.read += 1;
                    }
                }
                Job::Mask(n, mut batch) => {
                    mask_batch(&masker, &mut batch, &mut scratch);
                    shared.lock().masked.push((n, batch));
                }
            }
            shared.changed.notify_all();
        }
    });
    (Batches { shared }, handle)
}

/// What the reader does next: read lines into a spare batch, or mask batch `n`.
enum Job {
    Read(Batch),
    Mask(u64, Batch),
}

/// Lines (`\n`, with `\r\n` tolerated; invalid UTF-8 replaced), read in large blocks.
struct LineReader {
    input: Box<dyn Read + Send>,
    /// `buf[..filled]` holds what is read; `start` is where the next line begins.
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    /// `buf[start..start + scanned]` holds no newline: a line longer than a read is
    /// searched once, not again from its start after every read.
    scanned: usize,
    /// `buf[..checked]`, whole lines, is known to be UTF-8: checked once per block, so
    /// that a line costs no check of its own.
    checked: usize,
    eof: bool,
    bytes_read: u64,
}

impl LineReader {
    fn new(input: Box<dyn Read + Send>) -> LineReader {
        LineReader {
            input,
            buf: vec![0; READ_BYTES],
            start: 0,
            filled: 0,
            scanned: 0,
            checked: 0,
            eof: false,
            bytes_read: 0,
        }
    }

    /// Every line has been taken.
    fn done(&self) -> bool {
        self.eof && self.start >= self.filled
    }

    /// Fills a batch with the next lines, raw: [`BATCH_LINES`] of them, or the rest.
    fn fill(&mut self, batch: &mut Batch) -> io::Result<()> {
        batch.text.clear();
        batch.ends.clear();
        batch.masked = false;
        while batch.ends.len() < BATCH_LINES {
            let (buf, start, filled) = (&self.buf, self.start, self.filled);
            // At the end, what is left is the last line (without its newline).
            let found = find_newline(&buf[start + self.scanned..filled]).map(|p| p + self.scanned);
            let Some(nl) = found.or((self.eof && start < filled).then_some(filled - start)) else {
                if self.eof {
                    break;
                }
                self.scanned = filled - start;
                self.read_more()?;
                continue;
            };
            let mut end = nl;
            while end > 0 && buf[start + end - 1] == b'\r' {
                end -= 1;
            }
            let raw = &buf[start..start + end];
            // A line of a block checked as a whole needs no check of its own; otherwise
            // validating is much cheaper than the lossy conversion, which is only needed
            // for the rare line that is not UTF-8.
            let text = if start + end <= self.checked {
                // SAFETY: `buf[..checked]` is UTF-8, and a line starts after a `\n` and
                // ends before a `\r` or `\n`, never inside a character.
                std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) })
            } else {
                String::from_utf8_lossy(raw)
            };
            batch.text.push_str(&text);
            batch.ends.push(batch.text.len());
            self.start = (start + nl + 1).min(filled);
            self.scanned = 0;
        }
        Ok(())
    }

    /// Keeps the partial line at the front and reads more after it. Only called when
    /// `buf[start..filled]` holds no newline.
    fn read_more(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.filled -= self.start;
            self.start = 0;
        }
        if self.filled == self.buf.len() {
            // A line longer than the buffer.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = loop {
            match self.input.read(&mut self.buf[self.filled..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        let old = self.filled;
        self.eof = n == 0;
        self.bytes_read += n as u64;
        self.filled += n;
        // Check the whole lines in one go: up to the last newline (in what was just read:
        // the partial line before it has none), or everything at the end. Where that
        // fails, each line is checked alone.
        let whole = if self.eof {
            self.filled
        } else {
            self.buf[old..self.filled].iter().rposition(|&c| c == b'\n').map_or(0, |p| old + p + 1)
        };
        self.checked = if std::str::from_utf8(&self.buf[..whole]).is_ok() { whole } else { 0 };
        Ok(())
    }
}

/// Masks a raw batch's lines, through `scratch`, which takes the raw text.
fn mask_batch(masker: &Masker, batch: &mut Batch, scratch: &mut String) {
    scratch.clear();
    let mut start = 0;
    for end in batch.ends.iter_mut() {
        masker.mask_append(&batch.text[start..*end], scratch);
        start = *end;
        *end = scratch.len();
    }
    std::mem::swap(&mut batch.text, scratch);
    batch.masked = true;
}

/// The first `\n` in `b`, eight bytes at a time: lines are short, and a byte-by-byte
/// search was a visible share of the reader's time.
#[inline]
fn find_newline(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while i + 8 <= b.len() {
        // A byte of `w` is zero where `b` has a newline; the lowest flagged byte of the
        // classic has-a-zero-byte test is the first such byte (a false flag can only
        // follow a true one).
        let w = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes")) ^ (ONES * u64::from(b'\n'));
        let zero = w.wrapping_sub(ONES) & !w & HIGHS;
        if zero != 0 {
            return Some(i + (zero.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == b'\n').map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_are_found_at_every_offset() {
        for len in 0..40 {
            for at in 0..=len {
                let mut b = vec![b'x'; len];
                if at < len {
                    b[at] = b'\n';
                    // A second newline and bytes that look alike must not matter.
                    if at + 3 < len {
                        b[at + 3] = b'\n';
                    }
                    if at > 0 {
                        b[at - 1] = 0x0b;
                    }
                }
                assert_eq!(find_newline(&b), (at < len).then_some(at), "len {len} at {at}");
            }
        }
        assert_eq!(find_newline("é\u{10a}\n".as_bytes()), Some(4));
    }

    /// Every line the reader hands over, as the miner's thread sees it (masked or not).
    fn read_lines(input: Vec<u8>) -> Vec<String> {
        read_from(Box::new(std::io::Cursor::new(input)))
    }

    /// A pipe: a few bytes per read, so lines span many reads.
    struct Trickle(std::io::Cursor<Vec<u8>>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1);
            self.0.read(&mut buf[..n])
        }
    }

    fn read_from(input: Box<dyn Read + Send>) -> Vec<String> {
        let masker = crate::mine::Masker::default();
        let (batches, handle) = spawn_reader(input, masker.clone(), |_| {});
        let mut out = Vec::new();
        for batch in batches {
            let mut start = 0;
            for &end in &batch.ends {
                let line = &batch.text[start..end];
                out.push(if batch.masked { line.to_string() } else { masker.mask(line) });
                start = end;
            }
        }
        handle.join().unwrap().unwrap();
        out
    }

    #[test]
    fn the_reader_splits_lines_like_read_until() {
        let masker = crate::mine::Masker::default();
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for n in 0..5000 {
            let line = match n % 7 {
                0 => format!("line {n} with crlf\r\r"),
                1 => String::new(),
                2 => format!("{} long {n}", "é".repeat(600_000 * usize::from(n == 2))),
                3 => format!("bad \u{1}utf8 {n} \u{ff}"),
                _ => format!("block blk_{n} from /10.0.{}.{}:50010", n % 256, n % 7),
            };
            let mut bytes = line.clone().into_bytes();
            if n % 7 == 3 {
                // Not UTF-8: replaced, for this line only.
                bytes.push(0xff);
            }
            expected.push(masker.mask(String::from_utf8_lossy(&bytes).trim_end_matches('\r')));
            input.extend_from_slice(&bytes);
            input.push(b'\n');
        }
        assert_eq!(read_lines(input.clone()), expected);
        for chunk in [1, 7, 4096, 65_536] {
            let trickle = Trickle(std::io::Cursor::new(input.clone()), chunk);
            assert_eq!(read_from(Box::new(trickle)), expected, "reads of {chunk} bytes");
        }
        // The last line needs no newline; a lone `\r` at the end is an empty line.
        input.extend_from_slice(b"last one");
        expected.push("last one".to_string());
        assert_eq!(read_lines(input.clone()), expected);
        input.extend_from_slice(b"\n\r");
        expected.push(String::new());
        assert_eq!(read_lines(input), expected);
        assert!(read_lines(Vec::new()).is_empty());
    }
}
