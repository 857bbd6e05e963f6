//! Numbers, durations, timestamps and tables as plain text: shared by the reports, the error messages and
//! both front-ends.

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

/// A left/right-aligned text table with a header rule.
pub fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let parts: Vec<String> = cells
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if right.get(i).copied().unwrap_or(false) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    let rule: usize = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    out.push_str(&"-".repeat(rule));
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
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

/// Now, as RFC 3339 UTC.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_366_792), "1,366,792");
        assert_eq!(si(999), "999");
        assert_eq!(si(4_089_000_000), "4.09 G");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(12), "12 B");
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
