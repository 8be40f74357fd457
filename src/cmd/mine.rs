//! `tayga mine [FILE|-]`: mine templates from a file of log messages, one per line, with
//! the same engine and default configuration as the logminer.
//!
//! By default each line is printed with its template's *final* text (after the whole
//! input has been mined), which is what a reader wants from a finished file; ids do not
//! change as a template generalises, so only the text differs from what the logminer saw
//! at the time. `--online` prints each line as it is mined instead, for endless pipes.

use crate::cli::{MineArgs, MineFormat as Format};
use crate::cmd::table::{stderr_is_terminal, Layout, Table};
use crate::mine::batches::spawn_reader;
use crate::mine::{Change, FastMap, Miner, MiningConfig};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
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
    if !args.no_memo {
        miner.remember_lines(MEMO_LINES);
    }

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
    let bar = progress.clone();
    let (mut batches, reader) = spawn_reader(input, miner.masker().clone(), move |bytes| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
        }
    });
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
}
