//! `tayga mine [FILE|-]`: mine templates from a file of log messages, one per line, with
//! the same engine and default configuration as the logminer.
//!
//! By default each line is printed with its template's *final* text (after the whole
//! input has been mined), which is what a reader wants from a finished file; ids do not
//! change as a template generalises, so only the text differs from what the logminer saw
//! at the time. `--online` prints each line as it is mined instead, for endless pipes.

use crate::cli::{MineArgs, MineFormat as Format};
use crate::cmd::table::{stderr_is_terminal, Layout, Table};
use crate::mine::{Change, FastMap, Miner, MiningConfig};
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Progress is worth drawing only for inputs that take more than a moment.
const PROGRESS_MIN_BYTES: u64 = 8 << 20;

pub fn run(
    args: &MineArgs,
    logminer: &crate::config::LogminerConfig,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let format = if json { Format::Json } else { args.format };
    let config = match &args.mining_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            toml::from_str::<MiningConfig>(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => logminer.mining(),
    };
    let mut miner = Miner::new(config).context("masking configuration")?;
    // One service, so the memory is bounded and small (16,384 lines of at most 1 KiB),
    // and most lines of a file repeat a masked text seen before: those skip Drain's search.
    miner.remember_lines(MEMO_LINES);

    let (name, size, input): (String, Option<u64>, Box<dyn Read + Send>) = if args.file == "-" {
        if io::stdin().is_terminal() {
            // Without a file, a terminal would otherwise wait in silence.
            writeln!(
                err,
                "tayga mine: reading log lines from standard input (end with Ctrl-D; `tayga mine FILE` reads a file)"
            )?;
        }
        ("standard input".to_string(), None, Box::new(io::stdin()))
    } else {
        let file = File::open(&args.file).with_context(|| format!("opening {}", args.file))?;
        let size = file.metadata().ok().map(|m| m.len());
        (args.file.clone(), size, Box::new(file))
    };

    let progress = match size {
        Some(size) if size >= PROGRESS_MIN_BYTES && stderr_is_terminal() => {
            let bar = indicatif::ProgressBar::new(size);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .expect("static template"),
            );
            Some(bar)
        }
        _ => None,
    };

    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut table = (format == Format::Table).then(new_table);
    let per_line_online = args.online;
    if per_line_online && format == Format::Csv {
        writeln!(out, "line,template_id,template").or_else(ignore_broken_pipe)?;
    }

    // Dense local indices per template id: the per-line record is 4 bytes, and the
    // final text and count of an evicted template are still known at the end.
    let mut index: FastMap<u64, u32> = FastMap::default();
    let mut ids: Vec<u64> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut per_line: Vec<u32> = Vec::new();
    // A merge retires templates: their index points at the survivor's, and every line
    // they had is printed with the survivor (lines already printed `--online` keep theirs).
    let mut alias: Vec<u32> = Vec::new();
    let (mut born, mut merges) = (0u64, 0u64);

    // Masking is most of the work and needs no state: a second thread reads batches of
    // lines and masks some of them while this one masks the others and mines them all, in
    // order (see `Batches`).
    let started = Instant::now();
    let (mut batches, reader) = spawn_reader(input, miner.masker().clone(), progress.clone());
    let mut lines: u64 = 0;
    while let Some(batch) = batches.next() {
        let mut start = 0;
        for &end in &batch.ends {
            // Masked by the reader, or the raw line for this thread to mask.
            let masked = &batch.text[start..end];
            start = end;
            lines += 1;
            let r =
                if batch.masked { miner.add_masked(&args.service, masked) } else { miner.add(&args.service, masked) };
            // A template born again after it was absorbed is a template of its own.
            let idx = match index.get(&r.template_id).copied().filter(|&i| alias[i as usize] == i) {
                Some(i) => i,
                None => {
                    let i = ids.len() as u32;
                    ids.push(r.template_id);
                    texts.push(String::new());
                    counts.push(0);
                    alias.push(i);
                    index.insert(r.template_id, i);
                    i
                }
            };
            match &r.change {
                Change::New => born += 1,
                Change::Merged { absorbed, .. } => {
                    merges += 1;
                    for id in absorbed {
                        if let Some(&a) = index.get(id) {
                            alias[a as usize] = idx;
                            counts[idx as usize] += std::mem::take(&mut counts[a as usize]);
                        }
                    }
                }
                _ => {}
            }
            if r.change != Change::Unchanged || texts[idx as usize].is_empty() {
                texts[idx as usize].clear();
                texts[idx as usize].push_str(r.template);
            }
            counts[idx as usize] += 1;
            if per_line_online {
                let row = LineRow { line: lines, id: r.template_id, template: r.template };
                row.write(format, &mut out, table.as_mut()).or_else(ignore_broken_pipe)?;
            } else if !args.templates {
                per_line.push(idx);
            }
        }
        batches.recycle(batch);
    }
    drop(batches);
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?
        .with_context(|| format!("reading {name}"))?;
    let mined_in = started.elapsed();
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }

    // Follow each retired template to the one that finally holds its lines.
    let resolve = |mut i: u32| {
        while alias[i as usize] != i {
            i = alias[i as usize];
        }
        i
    };
    let resolved: Vec<u32> = (0..alias.len() as u32).map(resolve).collect();
    for l in per_line.iter_mut() {
        *l = resolved[*l as usize];
    }
    let live = (0..ids.len()).filter(|&i| resolved[i] as usize == i).count();
    let written = if args.templates {
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| resolved[i] as usize == i).collect();
        order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(ids[a].cmp(&ids[b])));
        write_templates(format, &mut out, &order, &ids, &texts, &counts)
    } else if !per_line_online {
        write_lines(format, &mut out, &per_line, &ids, &texts)
    } else {
        match table.take() {
            Some(t) => write!(out, "{}", t.render(Layout::current())),
            None => Ok(()),
        }
    };
    written.and_then(|()| out.flush()).or_else(ignore_broken_pipe)?;

    if args.stats {
        print_stats(err, lines, live, born, merges, mined_in, miner.masking_version())?;
    }
    Ok(())
}

/// Masked lines the miner remembers (`Miner::remember_lines`).
const MEMO_LINES: usize = 1 << 14;

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
struct Batch {
    text: String,
    ends: Vec<usize>,
    masked: bool,
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
struct Batches {
    shared: Arc<Shared>,
}

impl Batches {
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

    fn recycle(&self, batch: Batch) {
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
fn spawn_reader(
    input: Box<dyn Read + Send>,
    masker: crate::mine::Masker,
    progress: Option<indicatif::ProgressBar>,
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
                    if let Some(bar) = &progress {
                        bar.set_position(lines.bytes_read);
                    }
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
fn mask_batch(masker: &crate::mine::Masker, batch: &mut Batch, scratch: &mut String) {
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

/// `tayga mine big.log | head` should stop quietly, not report an error.
fn ignore_broken_pipe(e: io::Error) -> Result<()> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(e).context("writing output")
    }
}

/// The per-line table (`--format table`), laid out for this process's stdout.
fn new_table() -> Table {
    Table::new(["line", "template_id", "template"]).numeric(&["line"])
}

struct LineRow<'a> {
    line: u64,
    id: u64,
    template: &'a str,
}

impl LineRow<'_> {
    fn write(&self, format: Format, out: &mut impl Write, table: Option<&mut Table>) -> io::Result<()> {
        match format {
            Format::Csv => writeln!(out, "{},{:016x},{}", self.line, self.id, csv_field(self.template)),
            Format::Json => writeln!(
                out,
                "{{\"line\":{},\"template_id\":\"{:016x}\",\"template\":{}}}",
                self.line,
                self.id,
                json_string(self.template)
            ),
            Format::Table => {
                let table = table.expect("a table for the table format");
                table.row([self.line.to_string(), format!("{:016x}", self.id), self.template.to_string()]);
                Ok(())
            }
        }
    }
}

fn write_lines(
    format: Format,
    out: &mut impl Write,
    per_line: &[u32],
    ids: &[u64],
    texts: &[String],
) -> io::Result<()> {
    if format == Format::Csv {
        writeln!(out, "line,template_id,template")?;
    }
    let mut table = (format == Format::Table).then(new_table);
    // Quoting a template once, not once per line, matters on millions of lines.
    let quoted: Vec<String> = match format {
        Format::Csv => texts.iter().map(|t| csv_field(t).into_owned()).collect(),
        Format::Json => texts.iter().map(|t| json_string(t)).collect(),
        Format::Table => Vec::new(),
    };
    for (n, &idx) in per_line.iter().enumerate() {
        let i = idx as usize;
        match format {
            Format::Csv => writeln!(out, "{},{:016x},{}", n + 1, ids[i], quoted[i])?,
            Format::Json => {
                writeln!(out, "{{\"line\":{},\"template_id\":\"{:016x}\",\"template\":{}}}", n + 1, ids[i], quoted[i])?
            }
            Format::Table => {
                let row = LineRow { line: n as u64 + 1, id: ids[i], template: &texts[i] };
                row.write(format, out, table.as_mut())?;
            }
        }
    }
    if let Some(t) = table {
        write!(out, "{}", t.render(Layout::current()))?;
    }
    Ok(())
}

fn write_templates(
    format: Format,
    out: &mut impl Write,
    order: &[usize],
    ids: &[u64],
    texts: &[String],
    counts: &[u64],
) -> io::Result<()> {
    match format {
        Format::Csv => {
            writeln!(out, "template_id,count,template")?;
            for &i in order {
                writeln!(out, "{:016x},{},{}", ids[i], counts[i], csv_field(&texts[i]))?;
            }
        }
        Format::Json => {
            for &i in order {
                writeln!(
                    out,
                    "{{\"template_id\":\"{:016x}\",\"count\":{},\"template\":{}}}",
                    ids[i],
                    counts[i],
                    json_string(&texts[i])
                )?;
            }
        }
        Format::Table => {
            let mut t = Table::new(["template_id", "count", "template"]).numeric(&["count"]);
            for &i in order {
                t.row([format!("{:016x}", ids[i]), counts[i].to_string(), texts[i].clone()]);
            }
            write!(out, "{}", t.render(Layout::current()))?;
        }
    }
    Ok(())
}

/// RFC 4180 quoting, only when needed.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    let needs = s.bytes().any(|c| matches!(c, b',' | b'"' | b'\n' | b'\r')) || s.starts_with(' ') || s.ends_with(' ');
    if needs {
        std::borrow::Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serialises")
}

fn print_stats(
    err: &mut dyn Write,
    lines: u64,
    templates: usize,
    born: u64,
    merges: u64,
    elapsed: Duration,
    masking_version: &str,
) -> io::Result<()> {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { lines as f64 / secs } else { 0.0 };
    let peak = peak_memory_kib().map_or_else(|| "n/a".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    writeln!(err, "lines        {lines}")?;
    writeln!(err, "templates    {templates}")?;
    // Born: what the logminer would announce if each birth reached a new-template pass
    // before a merge retired it (the worst case); merges: how many lines merged templates.
    writeln!(err, "born         {born}")?;
    writeln!(err, "merges       {merges}")?;
    writeln!(err, "mined in     {secs:.3} s")?;
    writeln!(err, "lines/s      {rate:.0}")?;
    writeln!(err, "peak memory  {peak}")?;
    writeln!(err, "masking      {masking_version}")
}

/// Peak resident set size (VmHWM) in KiB, where the platform reports it.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("a b"), "a b");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field(" lead"), "\" lead\"");
    }

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
        let (mut batches, handle) = spawn_reader(input, masker.clone(), None);
        let mut out = Vec::new();
        while let Some(batch) = batches.next() {
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
