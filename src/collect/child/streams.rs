//! Reading a child's output with bounded memory: line by line with each line cut at a limit,
//! the last lines of a stream kept for a failure report, or the last bytes of it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Lines of a child's stderr kept for a failure report.
pub const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept, in bytes (the rest is cut).
pub const STDERR_LINE_BYTES: usize = 2000;

/// Calls `f` with each line of a stream (lossily decoded, line end removed, and at most `max`
/// bytes of it: the rest of a longer line is read and dropped, so memory stays bounded however
/// long a line is) and how many bytes were dropped from it, until the stream ends or `f` returns
/// false.
pub fn for_each_line(stream: impl Read, max: usize, mut f: impl FnMut(String, usize) -> bool) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        dropped += part.len().saturating_sub(room);
        let used = newline.map_or(chunk.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            let text = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            line.clear();
            if !f(text, std::mem::take(&mut dropped)) {
                return;
            }
        }
    }
    if !line.is_empty() || dropped > 0 {
        f(String::from_utf8_lossy(&line).into_owned(), dropped);
    }
}

/// The last lines of a child's stderr, shared with the thread that reads them; the condvar
/// says when the stream has ended.
#[derive(Clone, Default)]
pub struct Tail(std::sync::Arc<(std::sync::Mutex<TailLines>, std::sync::Condvar)>);

#[derive(Default)]
pub struct TailLines {
    lines: VecDeque<String>,
    ended: bool,
}

impl Tail {
    /// Reads `stream` to its end into the tail, each line cut to [`STDERR_LINE_BYTES`].
    pub fn fill(&self, stream: impl Read) {
        for_each_line(stream, STDERR_LINE_BYTES, |line, _| {
            self.push(&line);
            true
        });
        self.end();
    }

    /// Keeps one more line, cut to [`STDERR_LINE_BYTES`].
    pub(super) fn push(&self, line: &str) {
        let mut cut = line.len().min(STDERR_LINE_BYTES);
        // Not in the middle of a character.
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Ok(mut tail) = self.0 .0.lock() {
            tail.lines.push_back(line[..cut].to_string());
            if tail.lines.len() > STDERR_TAIL_LINES {
                tail.lines.pop_front();
            }
        }
    }

    /// Says that the stream has ended.
    pub(super) fn end(&self) {
        if let Ok(mut tail) = self.0 .0.lock() {
            tail.ended = true;
        }
        self.0 .1.notify_all();
    }

    /// The lines so far, once the stream has ended or `wait` has passed (a process outside our
    /// reach may hold the stream open for ever).
    pub fn text(&self, wait: Duration) -> String {
        let Ok(tail) = self.0 .0.lock() else {
            return String::new();
        };
        match self.0 .1.wait_timeout_while(tail, wait, |t| !t.ended) {
            Ok((tail, _)) => Vec::from(tail.lines.clone()).join("\n"),
            Err(_) => String::new(),
        }
    }
}

/// Reads `stream` to its end, keeping its last `limit` bytes (a cut character becomes U+FFFD).
pub(super) fn read_tail(mut stream: impl Read, limit: usize) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                // Trimmed in steps, so a long stream costs a copy per `limit` bytes, not per read.
                if kept.len() > limit.saturating_mul(2) {
                    kept.drain(..kept.len() - limit);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if kept.len() > limit {
        kept.drain(..kept.len() - limit);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Reads `stream` on a thread of its own, keeping its last `limit` bytes.
pub fn keep_tail<R: Read + Send + 'static>(
    stream: Option<R>,
    limit: usize,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || stream.map_or_else(String::new, |s| read_tail(s, limit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_at_the_limit_and_the_rest_is_dropped() {
        let mut seen = Vec::new();
        for_each_line(
            "short\nlonger line\r\nend".as_bytes(),
            6,
            |line, dropped| {
                seen.push((line, dropped));
                true
            },
        );
        assert_eq!(
            seen,
            vec![
                ("short".to_string(), 0),
                ("longer".to_string(), 6),
                ("end".to_string(), 0)
            ]
        );
    }

    fn tail_of(stream: &[u8]) -> String {
        let tail = Tail::default();
        tail.fill(stream);
        tail.text(Duration::ZERO)
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let text: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let t = tail_of(text.as_bytes());
        assert_eq!(t.lines().count(), STDERR_TAIL_LINES);
        assert!(t.starts_with("line 10") && t.ends_with("line 29"));
        let long = "x".repeat(5000);
        assert_eq!(tail_of(long.as_bytes()).len(), STDERR_LINE_BYTES);
    }

    #[test]
    fn the_last_bytes_are_kept() {
        assert_eq!(read_tail(&b"0123456789"[..], 4), "6789");
        assert_eq!(read_tail(&b"short"[..], 100), "short");
    }
}
