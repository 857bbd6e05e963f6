//! Writes to the terminal that never panic. Over SSH the terminal can vanish mid-run (a dropped
//! link, a closed tmux pane) and a pipe reader can leave early (`| head`); the standard printing
//! macros would then panic ("failed printing to stderr"). These write, flush and report success
//! instead, so a caller that cares (the progress line) can stop writing, and everyone else
//! carries on with the work. Standard output goes through `cli::print_out`, which returns the
//! error to its caller.

use std::fmt;
use std::io::Write;

/// Writes to standard error; false when it is gone.
pub fn err(args: fmt::Arguments) -> bool {
    write_to(&mut std::io::stderr().lock(), args)
}

/// Writes and flushes `args` to `stream`; false when it is gone.
fn write_to(stream: &mut impl Write, args: fmt::Arguments) -> bool {
    stream.write_fmt(args).and_then(|_| stream.flush()).is_ok()
}

/// Writes a line to standard error with its control characters (other than line ends and
/// tabs) shown escaped ([`crate::text::shown_lines`]): a message quotes text read from files,
/// child processes and the network, whose escape sequences must not reach the terminal.
/// False when standard error is gone.
pub fn err_line(args: fmt::Arguments) -> bool {
    let text = for_terminal(&crate::text::shown_lines(&args.to_string()), 2);
    err(format_args!("{text}\n"))
}

/// `text` as the terminal that descriptor `fd` writes to shows it: its long lines broken at
/// spaces to the terminal's width ([`crate::text::fit_lines`]) rather than by the terminal
/// inside a word; a file or a pipe gets it as it is.
pub fn for_terminal(text: &str, fd: i32) -> String {
    match columns(fd) {
        Some(width) => crate::text::fit_lines(text, width),
        None => text.to_string(),
    }
}

/// The width of the terminal that standard output (`fd` 1) or standard error (2) writes to;
/// None when it is not a terminal or says no width.
pub fn columns(fd: i32) -> Option<usize> {
    // SAFETY: isatty and TIOCGWINSZ only read the descriptor's state into the winsize owned
    // here.
    unsafe {
        if libc::isatty(fd) != 1 {
            return None;
        }
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) != 0 || size.ws_col == 0 {
            return None;
        }
        Some(usize::from(size.ws_col))
    }
}

/// Writes to standard error without a line end; never panics.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = $crate::text::console::err(format_args!($($arg)*));
    }};
}

/// Writes a line to standard error, its control characters shown escaped
/// ([`err_line`]); never panics.
#[macro_export]
macro_rules! errln {
    () => {{
        let _ = $crate::text::console::err(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        let _ = $crate::text::console::err_line(format_args!($($arg)*));
    }};
}

#[cfg(test)]
mod tests {
    use super::write_to;
    use std::io::Write;

    /// A terminal that went away: every write fails as a closed pipe does.
    struct Gone;

    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_write_that_lands_reports_success() {
        let mut out = Vec::new();
        assert!(write_to(&mut out, format_args!("{} of {}", 1, 2)));
        assert_eq!(out, b"1 of 2");
    }

    #[test]
    fn a_stream_that_is_gone_reports_failure_without_panicking() {
        assert!(!write_to(&mut Gone, format_args!("lost")));
    }
}
