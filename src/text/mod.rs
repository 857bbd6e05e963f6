//! Numbers, durations, timestamps and tables as plain text: shared by the reports, the error messages and
//! both front-ends.

#[macro_use]
pub mod console;
#[macro_use]
mod serde;

use std::sync::atomic::{AtomicUsize, Ordering};

/// 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count with an SI prefix: 1.23 G, 45.6 M, 789 k, 12.
pub fn si(value: u64) -> String {
    let v = value as f64;
    for (scale, unit) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if v >= scale {
            return format!("{:.2} {unit}", v / scale);
        }
    }
    value.to_string()
}

/// Bytes with a binary prefix: 1.5 MiB.
pub fn bytes(value: u64) -> String {
    let v = value as f64;
    for (scale, unit) in [
        (1024f64.powi(5), "PiB"),
        (1024f64.powi(4), "TiB"),
        (1024f64.powi(3), "GiB"),
        (1024f64.powi(2), "MiB"),
        (1024.0, "KiB"),
    ] {
        if v >= scale {
            return format!("{:.2} {unit}", v / scale);
        }
    }
    format!("{value} B")
}

/// `text` broken at spaces into lines of at most `width` characters, the lines after the first
/// starting with `indent`; a word longer than a line is cut.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let width = width.max(indent.chars().count() + 10);
    let mut out = String::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let sep = usize::from(len > 0);
            if len + sep + word.len() <= width {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                len += sep + word.len();
                break;
            }
            let fresh = indent.chars().count();
            if len > fresh || (len > 0 && out.is_empty()) {
                // Start a new line for the word.
                out.push_str(&line);
                out.push('\n');
                line = indent.to_string();
                len = fresh;
                continue;
            }
            // A word longer than a whole line: cut it.
            let room = width - len - sep;
            if sep == 1 {
                line.push(' ');
            }
            line.extend(word.iter().take(room));
            out.push_str(&line);
            out.push('\n');
            word.drain(..room);
            line = indent.to_string();
            len = fresh;
        }
    }
    out.push_str(&line);
    out
}

/// `text` for a terminal `width` columns wide: each line longer than that broken at spaces
/// (as the terminal would otherwise break it, inside a word), its continuation lines indented
/// under its first word after a list marker (`1. `, `- `) or two spaces in; shorter lines, the
/// tables and charts fitted to the width among them, as they are.
pub fn fit_lines(text: &str, width: usize) -> String {
    if text.lines().all(|l| l.chars().count() <= width) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let body = line.trim_start_matches(' ');
        let lead = line.len() - body.len();
        let marker = body
            .split_once(' ')
            .filter(|(m, _)| {
                *m == "-"
                    || *m == "*"
                    || (m.ends_with('.') && m[..m.len() - 1].parse::<u32>().is_ok())
            })
            .map_or(2, |(m, _)| m.chars().count() + 1);
        let lead = lead.min(width / 2);
        // wrap() puts a space between its indent and the first word of a continuation line.
        let hang = " ".repeat(marker.min(width / 4).max(1) - 1);
        let pad = " ".repeat(lead);
        for (k, part) in wrap(body, width - lead, &hang).split('\n').enumerate() {
            if k > 0 {
                out.push('\n');
            }
            out.push_str(&pad);
            out.push_str(part);
        }
    }
    out
}

/// The candidate `word` most likely misspells: the same once case, `_`, `-` and `.` are set
/// aside (`mobilenetv2` → `mobilenet_v2`), else the nearest within two edits (a swapped pair
/// of letters is one: `modles` → `models`; one edit for words under five letters). None when
/// nothing is near, or `word` is a candidate itself.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| !"_-.".contains(*c))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = plain(word);
    let most = if wanted.chars().count() < 5 { 1 } else { 2 };
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == word {
            return None;
        }
        let d = strsim::damerau_levenshtein(&wanted, &plain(c));
        if d <= most && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `; did you mean CANDIDATE?` for the [`nearest`] candidate, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, candidates).map_or(String::new(), |c| format!("; did you mean {c}?"))
}

/// The last `n` lines of `text`, in order.
pub fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// The width [`table`] fits its tables to; 0 for whole tables.
static TABLE_WIDTH: AtomicUsize = AtomicUsize::new(0);

/// Fits every table [`table`] makes from now on to `columns` (the terminal's width), or leaves
/// them whole (None: output to a file or a pipe, or `--wide`).
pub fn fit_tables_to(columns: Option<usize>) {
    TABLE_WIDTH.store(columns.unwrap_or(0), Ordering::Relaxed);
}

/// The width tables are fitted to; None when they are printed whole.
pub fn table_width() -> Option<usize> {
    Some(TABLE_WIDTH.load(Ordering::Relaxed)).filter(|&w| w > 0)
}

/// Names made of `/`-separated parts (condition ids) without the parts that every one of them
/// has in the same place, and the pattern they share (`*` where they differ:
/// `*/*/3x224x224/b1/t0/cpu`). Names of different lengths, or fewer than two, come back
/// whole, with no pattern.
pub fn varying_parts(names: &[String]) -> (Vec<String>, Option<String>) {
    let split: Vec<Vec<&str>> = names.iter().map(|n| n.split('/').collect()).collect();
    let parts = split.first().map_or(0, Vec::len);
    if names.len() < 2 || split.iter().any(|p| p.len() != parts) {
        return (names.to_vec(), None);
    }
    let shared: Vec<bool> = (0..parts)
        .map(|i| split.iter().all(|p| p[i] == split[0][i]))
        .collect();
    if !shared.contains(&true) || !shared.contains(&false) {
        return (names.to_vec(), None);
    }
    let short = split
        .iter()
        .map(|p| {
            let kept: Vec<&str> = (0..parts).filter(|&i| !shared[i]).map(|i| p[i]).collect();
            kept.join("/")
        })
        .collect();
    let pattern: Vec<&str> = (0..parts)
        .map(|i| if shared[i] { split[0][i] } else { "*" })
        .collect();
    (short, Some(pattern.join("/")))
}

/// How a table is fitted to a narrow terminal: which columns carry its point.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fit<'a> {
    /// The columns kept longest, the most important first; the others are left out before
    /// them, from the right.
    pub keep: &'a [usize],
    /// The columns that carry the table's point (a verdict, the column it is ranked by): never
    /// left out, never cut.
    pub whole: &'a [usize],
    /// What the first column's names are (`condition`), when they are made of `/`-separated
    /// parts: a table that does not fit drops the parts every row shares, given once above it
    /// as `(every condition is */*/3x224x224/b1/t0/cpu)`.
    pub names: Option<&'a str>,
}

/// A left/right-aligned text table with a header rule, fitted to the width set with
/// [`fit_tables_to`]: its columns are left out from the right (never the first) until it fits.
pub fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    table_fit(header, right, rows, &Fit::default())
}

/// [`table`] with its columns' order of importance: `keep` names the columns kept longest, the
/// most important first; the others are left out before them, from the right.
pub fn table_keeping(
    header: &[&str],
    right: &[bool],
    rows: &[Vec<String>],
    keep: &[usize],
) -> String {
    table_fit(
        header,
        right,
        rows,
        &Fit {
            keep,
            ..Fit::default()
        },
    )
}

/// [`table`] fitted as `fit` says.
pub fn table_fit(header: &[&str], right: &[bool], rows: &[Vec<String>], fit: &Fit) -> String {
    table_within(header, right, rows, table_width(), fit)
}

/// The fewest characters a text column is cut to before columns are left out.
const TEXT_FLOOR: usize = 16;

/// `text` in at most `width` characters: cut in the middle (its start and its end, where names
/// differ, stay) with `…`.
pub fn cut_middle(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let head = (width - 1) / 3;
    let tail = width - 1 - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// Names joined with `+` (layers fused into one) with the `.`-separated start they share
/// written once: `features.15.conv.1.0+features.15.conv.1.1` → `features.15.conv.1.{0,1}`.
pub fn fused(label: &str) -> String {
    let names: Vec<&str> = label.split('+').collect();
    if names.len() < 2 {
        return label.to_string();
    }
    let split: Vec<Vec<&str>> = names.iter().map(|n| n.split('.').collect()).collect();
    let shortest = split.iter().map(Vec::len).min().unwrap_or(0);
    // Every name keeps at least its last part.
    let shared = (0..shortest.saturating_sub(1))
        .take_while(|&i| split.iter().all(|p| p[i] == split[0][i]))
        .count();
    if shared == 0 {
        return label.to_string();
    }
    let rests: Vec<String> = split.iter().map(|p| p[shared..].join(".")).collect();
    format!("{}.{{{}}}", split[0][..shared].join("."), rests.join(","))
}

/// A name made of `/`-separated parts in at most `width` characters: its longest parts cut in
/// the middle first, so that every part keeps its start and its end.
pub fn cut_parts(name: &str, width: usize) -> String {
    let mut parts: Vec<String> = name.split('/').map(str::to_string).collect();
    let len = |parts: &[String]| {
        parts.iter().map(|p| p.chars().count()).sum::<usize>() + parts.len().saturating_sub(1)
    };
    while len(&parts) > width {
        let Some(longest) = (0..parts.len())
            .filter(|&i| parts[i].chars().count() > 3)
            .max_by_key(|&i| parts[i].chars().count())
        else {
            return cut_middle(name, width);
        };
        let w = parts[longest].chars().count() - 1;
        parts[longest] = cut_middle(&parts[longest], w);
    }
    parts.join("/")
}

/// `text` as lines of at most `width` characters, broken at spaces (a word longer than a line
/// is cut in the middle).
fn wrapped(text: &str, width: usize) -> Vec<String> {
    if text.chars().count() <= width {
        return vec![text.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word = cut_middle(word, width);
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    lines.push(line);
    lines
}

/// A table in at most `width` columns (None: whole). Until it fits: the names of the first
/// column lose the parts every row shares (with [`Fit::names`]); text columns are narrowed to
/// no less than their header or 16 characters (prose, text with spaces, wraps onto more lines;
/// names are cut in the middle); then columns are left out by importance ([`Fit::keep`], most
/// important first; columns it does not name go first, from the right; the first column and
/// [`Fit::whole`]'s stay), and at last the text columns are narrowed further. What was left
/// out is said under the table.
pub fn table_within(
    header: &[&str],
    right: &[bool],
    rows: &[Vec<String>],
    width: Option<usize>,
    fit: &Fit,
) -> String {
    let keep = fit.keep;
    // A figure rounded to zero from below reads as zero, not `-0.000`.
    let mut rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| unsigned_zero(cell)).collect())
        .collect();
    let n = header.len();
    let natural = |rows: &[Vec<String>]| -> Vec<usize> {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        widths
    };
    let total = |shown: &[usize], widths: &[usize]| -> usize {
        shown.iter().map(|&i| widths[i]).sum::<usize>() + 2 * shown.len().saturating_sub(1)
    };
    let mut widths = natural(&rows);
    let mut out = String::new();
    // Names that do not fit lose the parts every row shares.
    if let (Some(limit), Some(what)) = (width, fit.names) {
        let all: Vec<usize> = (0..n).collect();
        if total(&all, &widths) > limit {
            let names: Vec<String> = rows
                .iter()
                .map(|r| r.first().cloned().unwrap_or_default())
                .collect();
            if let (short, Some(pattern)) = varying_parts(&names) {
                for (row, name) in rows.iter_mut().zip(short) {
                    if let Some(first) = row.first_mut() {
                        *first = name;
                    }
                }
                widths = natural(&rows);
                for line in wrapped(&format!("(every {what} is {pattern})"), limit) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
    }
    let rows = &rows[..];
    let is_text = |i: usize| !right.get(i).copied().unwrap_or(false);
    let whole = |i: usize| fit.whole.contains(&i);
    // Prose wraps; names (no spaces) are cut.
    let prose: Vec<bool> = (0..n)
        .map(|i| {
            is_text(i)
                && rows
                    .iter()
                    .any(|r| r.get(i).is_some_and(|c| c.contains(' ')))
        })
        .collect();
    let mut shown: Vec<usize> = (0..n).collect();
    let mut left_out: Vec<usize> = Vec::new();
    if let Some(limit) = width {
        // Left out first: the columns `keep` does not name, from the right; then those it
        // names, the least important first. The first column and the whole ones are never
        // left out.
        let mut order: Vec<usize> = (1..n)
            .rev()
            .filter(|&i| !keep.contains(&i) && !whole(i))
            .collect();
        order.extend(
            keep.iter()
                .rev()
                .copied()
                .filter(|&i| i > 0 && i < n && !whole(i)),
        );
        let mut order = order.into_iter();
        // Narrows the text columns, the widest first, by up to `excess` characters, none below
        // `floor(i)`; what could not be taken.
        let cut = |widths: &mut Vec<usize>,
                   shown: &[usize],
                   mut excess: usize,
                   floor: &dyn Fn(usize) -> usize|
         -> usize {
            while excess > 0 {
                let widest = shown
                    .iter()
                    .copied()
                    .filter(|&i| is_text(i) && !whole(i) && widths[i] > floor(i))
                    .max_by_key(|&i| widths[i]);
                let Some(i) = widest else { break };
                widths[i] -= 1;
                excess -= 1;
            }
            excess
        };
        // With `keep`, the first column (the names) is cut only once the columns it does not
        // name are gone; the other text columns are narrowed before anything goes.
        let floor = |i: usize| header[i].chars().count().max(TEXT_FLOOR);
        let whole_widths = widths.clone();
        let others_only = |i: usize| if i == 0 { whole_widths[i] } else { floor(i) };
        let unnamed = if keep.is_empty() {
            0
        } else {
            (1..n).filter(|i| !keep.contains(i) && !whole(*i)).count()
        };
        let mut dropped = 0;
        loop {
            let excess = total(&shown, &widths).saturating_sub(limit);
            if excess == 0 {
                break;
            }
            let mut trial = widths.clone();
            let names_may_be_cut = dropped >= unnamed;
            let left = if names_may_be_cut {
                cut(&mut trial, &shown, excess, &floor)
            } else {
                cut(&mut trial, &shown, excess, &others_only)
            };
            if left == 0 {
                widths = trial;
                break;
            }
            match order.next() {
                Some(i) => {
                    shown.retain(|&c| c != i);
                    left_out.push(i);
                    dropped += 1;
                }
                None => {
                    cut(&mut widths, &shown, excess, &|_| 1);
                    break;
                }
            }
        }
    }
    let lines = |cells: &[&str], out: &mut String| {
        let parts: Vec<Vec<String>> = shown
            .iter()
            .map(|&i| {
                let w = widths[i];
                let cell = cells.get(i).copied().unwrap_or("");
                if prose[i] {
                    wrapped(cell, w)
                } else if i == 0 && fit.names.is_some() {
                    vec![cut_parts(cell, w)]
                } else {
                    vec![cut_middle(cell, w)]
                }
            })
            .collect();
        let height = parts.iter().map(Vec::len).max().unwrap_or(1);
        for k in 0..height {
            let line: Vec<String> = shown
                .iter()
                .zip(&parts)
                .map(|(&i, part)| {
                    let w = widths[i];
                    let c = part.get(k).map_or("", String::as_str);
                    if is_text(i) {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
    };
    lines(header, &mut out);
    out.push_str(&"-".repeat(total(&shown, &widths)));
    out.push('\n');
    for row in rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        lines(&cells, &mut out);
    }
    if !left_out.is_empty() {
        left_out.sort_unstable();
        let names: Vec<&str> = left_out.iter().map(|&i| header[i]).collect();
        let note = format!("(not shown: {}; --wide shows all)", names.join(", "));
        for line in wrapped(&note, width.unwrap_or(usize::MAX)) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// A duration in words: 45 s, 12 min 5 s, 3 h 20 min.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The time now in UTC, RFC 3339 to the millisecond: `2026-12-02T15:58:31.123Z`.
pub fn now_rfc3339_millis() -> String {
    rfc3339_millis(time::OffsetDateTime::now_utc())
}

/// `t` in UTC, RFC 3339 with always three digits of milliseconds (`.420`, `.000`: the well-known
/// format would drop trailing zeros, and readers of fixed-width stamps rely on them).
fn rfc3339_millis(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// One CSV record (RFC 4180: a field with a comma, quote or line break is quoted, quotes
/// doubled), without its line end.
pub fn csv_record<I, T>(fields: I) -> String
where
    I: IntoIterator<Item = T>,
    T: AsRef<[u8]>,
{
    let mut writer = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    // Writing to memory fails only on an allocation failure, which aborts anyway.
    let _ = writer.write_record(fields);
    let bytes = writer.into_inner().unwrap_or_default();
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// Splits one CSV line into its fields (optionally double-quoted, a doubled quote inside quotes
/// being one quote). None when a quote is left open: a truncated line.
pub fn csv_split(line: &str) -> Option<Vec<String>> {
    let line = line.trim_end_matches(['\r', '\n']);
    // Quotes come in pairs (open and close, or a doubled quote inside) in a complete line.
    if line.bytes().filter(|&b| b == b'"').count() % 2 == 1 {
        return None;
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => Some(record.iter().map(str::to_string).collect()),
        // An empty line is one empty field, as a line without separators is one field.
        Ok(false) => Some(vec![String::new()]),
        Err(_) => None,
    }
}

/// A formatted figure without the sign of a negative zero: `-0.000 ms` (a sum of nothing, or
/// a tiny negative number rounded) reads `0.000 ms`; any other text is kept.
pub fn unsigned_zero(figure: &str) -> String {
    let Some(rest) = figure.strip_prefix('-') else {
        return figure.to_string();
    };
    let digits = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number = &rest[..digits];
    if number.starts_with('0') && number.chars().all(|c| c == '0' || c == '.') {
        rest.to_string()
    } else {
        figure.to_string()
    }
}

/// Text read from a file, a child process or the network, safe to put in a message on a
/// terminal: every control character (C0 such as ESC, DEL, C1 such as CSI, and the marks that
/// reorder text: U+202A–U+202E, U+2066–U+2069) is shown escaped (`\x1b`, `\x7f`, `\u{9b}`),
/// so that an escape sequence in a log cannot retitle, clear or recolour the terminal, and a
/// line break in it cannot forge a line of the message. Everything else is kept as it is.
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let n = u32::from(c);
        if n < 0x20 || n == 0x7f {
            out.push_str(&format!("\\x{n:02x}"));
        } else if c.is_control() || (0x202a..=0x202e).contains(&n) || (0x2066..=0x2069).contains(&n)
        {
            out.push_str(&format!("\\u{{{n:x}}}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// [`shown`] line by line: the line ends (and tabs) are kept, so that text of several lines
/// (a table, a note under an error) still reads as lines; every other control character is
/// escaped.
pub fn shown_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| line.split('\t').map(shown).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_break_at_spaces_under_their_first_word() {
        let text =
            "short\n   1. Raise arithmetic intensity at DRAM: cut the traffic there\n| a | b |";
        assert_eq!(
            fit_lines(text, 30),
            "short\n   1. Raise arithmetic\n      intensity at DRAM: cut\n      the traffic there\n| a | b |"
        );
        assert_eq!(
            fit_lines("warning: nothing in this run says so", 20),
            "warning: nothing in\n  this run says so"
        );
        // Nothing longer than the width: as it is.
        assert_eq!(fit_lines("a b\nc", 20), "a b\nc");
    }

    #[test]
    fn a_near_miss_finds_what_it_misspells_and_nothing_else() {
        let zoo = ["mobilenet_v2", "resnet18", "resnet34", "vgg19"];
        assert_eq!(nearest("mobilenetv2", zoo), Some("mobilenet_v2"));
        assert_eq!(nearest("MobileNet-V2", zoo), Some("mobilenet_v2"));
        assert_eq!(nearest("resnet19", zoo), Some("resnet18"));
        assert_eq!(nearest("modles", ["models", "nodes"]), Some("models"));
        assert_eq!(nearest("vgg", zoo), None);
        assert_eq!(nearest("efficientnet", zoo), None);
        assert_eq!(nearest("resnet18", zoo), None);
        assert_eq!(did_you_mean("resnt18", zoo), "; did you mean resnet18?");
        assert_eq!(did_you_mean("yolo", zoo), "");
    }

    #[test]
    fn text_of_several_lines_keeps_its_lines_and_loses_its_escapes() {
        assert_eq!(
            shown_lines("a\tb\n\u{1b}[2Jc\r\n"),
            "a\tb\n\\x1b[2Jc\\x0d\n"
        );
    }

    #[test]
    fn a_negative_zero_figure_reads_as_zero() {
        assert_eq!(unsigned_zero(&format!("{:.3}", -0.0_f64)), "0.000");
        assert_eq!(unsigned_zero("-0.0001 ms"), "-0.0001 ms");
        assert_eq!(unsigned_zero("-0.000 ms"), "0.000 ms");
        assert_eq!(unsigned_zero("-1.5"), "-1.5");
        assert_eq!(unsigned_zero("-"), "-");
    }

    #[test]
    fn untrusted_text_is_shown_with_its_control_characters_escaped() {
        assert_eq!(
            shown("hello \u{1b}]0;PWNED-TITLE\u{7} \u{1b}[2J\u{9b}31m\u{7f}\tend\n"),
            "hello \\x1b]0;PWNED-TITLE\\x07 \\x1b[2J\\u{9b}31m\\x7f\\x09end\\x0a"
        );
        assert_eq!(
            shown("r\u{e9}sum\u{e9} \u{202e}txt"),
            "r\u{e9}sum\u{e9} \\u{202e}txt"
        );
    }

    #[test]
    fn millisecond_stamps_keep_three_digits() -> Result<(), time::error::ComponentRange> {
        let at = |nanos: u32| -> Result<String, time::error::ComponentRange> {
            let t = time::OffsetDateTime::from_unix_timestamp(1_796_313_437)?
                .replace_nanosecond(nanos)?;
            Ok(rfc3339_millis(t))
        };
        assert_eq!(at(420_000_000)?, "2026-12-03T15:57:17.420Z");
        assert_eq!(at(0)?, "2026-12-03T15:57:17.000Z");
        assert_eq!(at(7_999_999)?, "2026-12-03T15:57:17.007Z");
        assert_eq!(now_rfc3339_millis().len(), 24);
        Ok(())
    }

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_366_792), "1,366,792");
        assert_eq!(si(999), "999");
        assert_eq!(si(4_089_000_000), "4.09 G");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(3 << 40), "3.00 TiB");
        assert_eq!(bytes(u64::MAX), "16384.00 PiB");
    }

    #[test]
    fn durations_read_as_words() {
        assert_eq!(duration(44.6), "45 s");
        assert_eq!(duration(725.0), "12 min 5 s");
        assert_eq!(duration(12_000.0), "3 h 20 min");
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(
            &["a", "n"],
            &[false, true],
            &[vec!["xx".into(), "1".into()], vec!["y".into(), "22".into()]],
        );
        assert_eq!(t, "a    n\n------\nxx   1\ny   22\n");
    }

    fn rows() -> Vec<Vec<String>> {
        vec![
            vec![
                "onnxruntime/mobilenet_v2/3x224x224/b1/t4/cpu".into(),
                "ok".into(),
                "17.000".into(),
                "0.310".into(),
                "disturbed by chrome (41 % of a core)".into(),
            ],
            vec![
                "onnxruntime/mobilenet_v2/3x224x224/b1/t2/cpu".into(),
                "ok".into(),
                "21.500".into(),
                "0.120".into(),
                "clean".into(),
            ],
        ]
    }
    const HEADER: [&str; 5] = ["condition", "status", "mean ms", "±", "notes"];
    const RIGHT: [bool; 5] = [false, false, true, true, false];

    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn a_table_that_fits_is_whole_and_one_that_does_not_is_cut_then_thinned() {
        let whole = table_within(&HEADER, &RIGHT, &rows(), None, &Fit::default());
        assert_eq!(widest(&whole), 44 + 2 + 6 + 2 + 7 + 2 + 5 + 2 + 36);
        assert_eq!(
            table_within(&HEADER, &RIGHT, &rows(), Some(200), &Fit::default()),
            whole
        );
        // At 80 columns the text columns are cut (in the middle: both ends of a name stay)
        // and nothing is left out.
        let t = table_within(&HEADER, &RIGHT, &rows(), Some(80), &Fit::default());
        assert!(widest(&t) <= 80, "{t}");
        assert!(!t.contains("not shown"), "{t}");
        assert!(t.contains("onnxrunt…"), "{t}");
        assert!(t.contains("b1/t4/cpu") && t.contains("b1/t2/cpu"), "{t}");
        // At 50 the last column goes, and the table says so.
        let t = table_within(&HEADER, &RIGHT, &rows(), Some(50), &Fit::default());
        assert!(widest(&t) <= 50, "{t}");
        assert!(t.ends_with("(not shown: notes; --wide shows all)\n"), "{t}");
        // Importance decides which go: here notes outlive the numbers.
        let t = table_within(
            &HEADER,
            &RIGHT,
            &rows(),
            Some(50),
            &Fit {
                keep: &[0, 4, 1],
                ..Fit::default()
            },
        );
        assert!(t.contains("distur") && t.contains("of a core)"), "{t}");
        assert!(t.contains("(not shown: mean ms, ±;"), "{t}");
        // Narrower than any column: the first column is cut to the width.
        let t = table_within(&HEADER, &RIGHT, &rows(), Some(10), &Fit::default());
        assert!(
            widest(&t.lines().take(4).collect::<Vec<_>>().join("\n")) <= 10,
            "{t}"
        );
    }

    #[test]
    fn fused_layers_share_their_start() {
        assert_eq!(
            fused("features.15.conv.1.0+features.15.conv.1.1"),
            "features.15.conv.1.{0,1}"
        );
        assert_eq!(
            fused("features.0.0+features.0.1+features.0.2"),
            "features.0.{0,1,2}"
        );
        assert_eq!(fused("conv1+relu"), "conv1+relu");
        assert_eq!(fused("layer1.0.conv1"), "layer1.0.conv1");
        // A name is never emptied: `a.b+a.b.c` keeps `b`.
        assert_eq!(fused("a.b+a.b.c"), "a.{b,b.c}");
    }

    #[test]
    fn names_cut_by_parts_keep_every_part() {
        assert_eq!(
            cut_parts("tract→onnxruntime/shufflenet_v2_x0_5/3x32x32", 40),
            "tract…nnxruntime/shuf…et_v2_x0_5/3x32x32"
        );
        assert_eq!(cut_parts("a/b", 10), "a/b");
        // Too narrow for every part: the whole name is cut in the middle.
        assert_eq!(cut_parts("abc/def", 3), "…ef");
    }

    #[test]
    fn names_keep_the_parts_that_differ() {
        let ids: Vec<String> = [
            "tract/mobilenet_v2/3x32x32/b1/t0/cpu",
            "onnxruntime/resnet18/3x32x32/b1/t0/cpu",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (short, pattern) = varying_parts(&ids);
        assert_eq!(short, ["tract/mobilenet_v2", "onnxruntime/resnet18"]);
        assert_eq!(pattern.as_deref(), Some("*/*/3x32x32/b1/t0/cpu"));
        // Nothing shared, everything shared, one name or unequal names: whole.
        for names in [
            vec!["a/b".to_string(), "c/d".to_string()],
            vec!["a/b".to_string(), "a/b".to_string()],
            vec!["a/b".to_string()],
            vec!["a/b".to_string(), "a/b/c".to_string()],
        ] {
            assert_eq!(varying_parts(&names), (names.clone(), None));
        }
    }

    #[test]
    fn prose_wraps_at_spaces_with_an_indent() {
        let text = "[1/4] tract/mobilenet_v2/3x224x224/b1/t0/cpu: ok, mean 2.000 ms ± 0.000, 500.0 inferences/s";
        let w = wrap(text, 50, "    ");
        assert!(w.lines().all(|l| l.chars().count() <= 50), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("    ")), "{w}");
        assert_eq!(
            w.split_whitespace().collect::<Vec<_>>(),
            text.split(' ').collect::<Vec<_>>()
        );
        assert_eq!(wrap("short", 40, "  "), "short");
        // A word longer than a line is cut, nothing lost.
        let long = "x".repeat(50);
        let w = wrap(&long, 20, "  ");
        assert!(w.lines().all(|l| l.chars().count() <= 20), "{w}");
        assert_eq!(w.chars().filter(|&c| c == 'x').count(), 50);
    }

    #[test]
    fn names_are_cut_in_the_middle() {
        assert_eq!(cut_middle("abcdefghij", 10), "abcdefghij");
        assert_eq!(cut_middle("abcdefghij", 7), "ab…ghij");
        assert_eq!(cut_middle("abcdefghij", 1), "…");
        assert_eq!(cut_middle("abc", 0), "");
    }

    #[test]
    fn csv_records_quote_only_what_needs_it_and_split_back() {
        let fields = ["plain", "a,b", "say \"hi\"", "two\nlines", ""];
        let line = csv_record(fields);
        assert_eq!(line, "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",");
        assert_eq!(csv_record(["x"]), "x");
        assert_eq!(
            csv_split("\"a\",\"1,234\",x,\"say \"\"hi\"\"\""),
            Some(vec![
                "a".into(),
                "1,234".into(),
                "x".into(),
                "say \"hi\"".into()
            ])
        );
        assert_eq!(
            csv_split("a,,b\r\n"),
            Some(vec!["a".into(), "".into(), "b".into()])
        );
        assert_eq!(csv_split("\"cut"), None);
        assert_eq!(csv_split("a,\"b,c"), None);
        assert_eq!(csv_split(""), Some(vec![String::new()]));
    }
}
