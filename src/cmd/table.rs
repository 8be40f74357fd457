//! Tables as the commands print them. On a terminal: aligned columns that fit its width,
//! the widest columns cut with `…` (`--wide` keeps every value whole; `--json` has them
//! whole too). To a pipe: one tab-separated line per row after a header line, nothing cut,
//! no padding, so `cut -f` and `awk -F'\t'` read it.
//!
//! The layout is a property of the process's standard output, like colour choice in ripgrep:
//! it is decided once, from whether stdout is a terminal and how wide it is.
//! `TAYGA_FORCE_TTY` forces terminal output (with a number, at that width), as
//! `GH_FORCE_TTY` does for gh, so tests can see what an operator sees.

use std::sync::OnceLock;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The variable that forces terminal output, optionally at a width (`TAYGA_FORCE_TTY=80`).
pub const FORCE_TTY_VAR: &str = "TAYGA_FORCE_TTY";

/// Narrowest a cut column becomes (its header, if longer, is kept whole).
const MIN_COLUMN: usize = 6;
const GAP: &str = "  ";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Aligned columns; cut to this many columns when `Some`.
    Terminal(Option<usize>),
    /// Tab-separated.
    Pipe,
}

static WIDE: OnceLock<bool> = OnceLock::new();
static TERMINALS: OnceLock<super::Terminals> = OnceLock::new();

/// Records `--wide` for the process (called once, by `cmd::run`).
pub fn set_wide(wide: bool) {
    let _ = WIDE.set(wide);
}

/// Records which of the process's streams are terminals (called once, by `cmd::run`).
pub fn set_terminals(terminals: super::Terminals) {
    let _ = TERMINALS.set(terminals);
}

/// Whether stderr is a terminal, so a progress bar there is seen.
pub fn stderr_is_terminal() -> bool {
    TERMINALS.get().is_some_and(|t| t.stderr)
}

impl Layout {
    /// The layout of this process's standard output.
    pub fn current() -> Layout {
        let wide = WIDE.get().copied().unwrap_or(false);
        let forced = std::env::var(FORCE_TTY_VAR).ok();
        let terminal = forced.is_some() || TERMINALS.get().is_some_and(|t| t.stdout);
        if !terminal {
            return Layout::Pipe;
        }
        if wide {
            return Layout::Terminal(None);
        }
        let width = forced
            .and_then(|v| v.trim().parse().ok())
            .or_else(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
            .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
            .unwrap_or(80);
        Layout::Terminal(Some(width))
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Layout::Terminal(_))
    }
}

/// A table: a header and rows of text. Columns marked numeric are right-aligned.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    numeric: Vec<bool>,
    /// Columns cut only once every other column is as narrow as it goes (ids, keys).
    keep: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        Table { numeric: vec![false; headers.len()], keep: vec![false; headers.len()], headers, rows: Vec::new() }
    }

    /// Keeps the named columns whole while other columns can still be cut.
    pub fn keep(mut self, columns: &[&str]) -> Table {
        for (i, h) in self.headers.iter().enumerate() {
            if columns.contains(&h.as_str()) {
                self.keep[i] = true;
            }
        }
        self
    }

    /// Right-aligns the named columns (counts, sizes).
    pub fn numeric(mut self, columns: &[&str]) -> Table {
        for (i, h) in self.headers.iter().enumerate() {
            if columns.contains(&h.as_str()) {
                self.numeric[i] = true;
            }
        }
        self
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text in `layout`, every line ending in a newline.
    pub fn render(&self, layout: Layout) -> String {
        match layout {
            Layout::Pipe => {
                let mut out = String::new();
                for line in std::iter::once(&self.headers).chain(&self.rows) {
                    // A tab or newline inside a value would split it: show them as spaces.
                    let cells: Vec<String> = line.iter().map(|c| c.replace(['\t', '\n', '\r'], " ")).collect();
                    out.push_str(&cells.join("\t"));
                    out.push('\n');
                }
                out
            }
            Layout::Terminal(width) => self.aligned(width),
        }
    }

    fn aligned(&self, width: Option<usize>) -> String {
        let n = self.headers.len();
        let flat = |c: &str| c.replace(['\t', '\n', '\r'], " ");
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| r.iter().map(|c| flat(c)).collect()).collect();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.width()).collect();
        for row in &rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.width());
            }
        }
        if let Some(limit) = width {
            let floor: Vec<usize> = self.headers.iter().map(|h| h.width().max(MIN_COLUMN)).collect();
            let total = |w: &[usize]| w.iter().sum::<usize>() + GAP.len() * n.saturating_sub(1);
            // Take one column from the widest cuttable column until the table fits; kept
            // columns only when nothing else can give.
            while total(&widths) > limit {
                let cuttable = |keep_too: bool| {
                    (0..n)
                        .filter(|&i| widths[i] > floor[i] && (keep_too || !self.keep[i]))
                        .max_by_key(|&i| (widths[i], i))
                };
                let Some(i) = cuttable(false).or_else(|| cuttable(true)) else {
                    break;
                };
                widths[i] -= 1;
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.headers).chain(&rows) {
            let mut text = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cut(line.get(i).map_or("", String::as_str), *w);
                let pad = " ".repeat(w - cell.width());
                if i > 0 {
                    text.push_str(GAP);
                }
                if self.numeric[i] {
                    text.push_str(&pad);
                    text.push_str(&cell);
                } else {
                    text.push_str(&cell);
                    text.push_str(&pad);
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text` cut to `width` display columns, ending in `…` when cut.
pub fn cut(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// A count as a table shows it: with thousands separators on a terminal, plain digits to a
/// pipe (so `sort -n` and `awk` read it).
pub fn count(n: impl Into<i128>, layout: Layout) -> String {
    let n: i128 = n.into();
    if layout.is_terminal() {
        thousands(n)
    } else {
        n.to_string()
    }
}

/// A sentence on a terminal of `width` columns: cut between words into lines that fit, the
/// lines after the first indented by two spaces. A word wider than the line stays whole.
pub fn wrap(line: &str, width: usize) -> String {
    if line.width() <= width {
        return line.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for word in line.split(' ') {
        let w = word.width();
        if used > 0 && used + 1 + w > width {
            out.push_str("\n  ");
            used = 2;
        } else if used > 0 {
            out.push(' ');
            used += 1;
        }
        out.push_str(word);
        used += w;
    }
    out
}

/// The writer a command's prose goes through: on a terminal that cuts to fit, each line wider
/// than the terminal is wrapped ([`wrap`]); elsewhere (a pipe, `--wide`) it passes as it is.
/// Tables already fit, so wrapping leaves them alone.
pub struct Wrapping<'a> {
    inner: &'a mut dyn std::io::Write,
    width: Option<usize>,
    line: Vec<u8>,
}

impl<'a> Wrapping<'a> {
    pub fn new(inner: &'a mut dyn std::io::Write, layout: Layout) -> Wrapping<'a> {
        let width = match layout {
            Layout::Terminal(Some(w)) => Some(w),
            _ => None,
        };
        Wrapping { inner, width, line: Vec::new() }
    }
}

impl std::io::Write for Wrapping<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(width) = self.width else { return self.inner.write(buf) };
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                let text = String::from_utf8_lossy(&self.line[..self.line.len() - 1]).into_owned();
                self.line.clear();
                self.inner.write_all(wrap(&text, width).as_bytes())?;
                self.inner.write_all(b"\n")?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.line.is_empty() {
            let rest = std::mem::take(&mut self.line);
            self.inner.write_all(&rest)?;
        }
        self.inner.flush()
    }
}

impl Drop for Wrapping<'_> {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// A count with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: impl Into<i128>) -> String {
    let n: i128 = n.into();
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// The line under a table whose rows a limit cut: `100 of 2,345 shown; --limit 0 shows all`.
pub fn shown_of(shown: usize, total: u64, how: &str) -> Option<String> {
    ((shown as u64) < total).then(|| format!("{} of {} shown; {how}", thousands(shown as u64), thousands(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["id", "template", "count"]).numeric(&["count"]);
        t.row(["a1", "user <*> logged in from <*> after a very long template text that goes on", "1234"]);
        t.row(["b2", "short", "5"]);
        t
    }

    #[test]
    fn a_terminal_table_fits_its_width_and_cuts_the_widest_column() {
        let text = sample().render(Layout::Terminal(Some(40)));
        for line in text.lines() {
            assert!(line.width() <= 40, "{line:?} is {} wide", line.width());
        }
        assert!(text.contains('…'), "{text}");
        assert!(text.lines().nth(2).unwrap().ends_with("    5"), "numbers align right: {text}");
    }

    #[test]
    fn wide_and_pipe_keep_every_value_whole() {
        let long = "user <*> logged in from <*> after a very long template text that goes on";
        assert!(sample().render(Layout::Terminal(None)).contains(long));
        let pipe = sample().render(Layout::Pipe);
        assert_eq!(pipe.lines().next(), Some("id\ttemplate\tcount"));
        assert!(pipe.contains(&format!("a1\t{long}\t1234")), "{pipe}");
    }

    #[test]
    fn cuts_and_counts() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(thousands(1_234_567u64), "1,234,567");
        assert_eq!(thousands(999u64), "999");
        assert_eq!(thousands(-1000i64), "-1,000");
        assert_eq!(
            shown_of(100, 2345, "--limit 0 shows all").as_deref(),
            Some("100 of 2,345 shown; --limit 0 shows all")
        );
        assert_eq!(shown_of(5, 5, "x"), None);
        assert_eq!(count(12_345u64, Layout::Pipe), "12345");
        assert_eq!(count(12_345u64, Layout::Terminal(Some(80))), "12,345");
    }

    #[test]
    fn long_sentences_wrap_on_a_terminal_and_pass_whole_to_a_pipe() {
        assert_eq!(wrap("one two three four", 9), "one two\n  three\n  four");
        assert_eq!(wrap("short", 9), "short");
        let mut out = Vec::new();
        {
            use std::io::Write;
            let mut w = Wrapping::new(&mut out, Layout::Terminal(Some(9)));
            write!(w, "one two three four\nok\n").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "one two\n  three\n  four\nok\n");
        let mut out = Vec::new();
        {
            use std::io::Write;
            let mut w = Wrapping::new(&mut out, Layout::Pipe);
            writeln!(w, "one two three four").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "one two three four\n");
    }
}
