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
    let mut stream = std::io::stderr().lock();
    stream.write_fmt(args).and_then(|_| stream.flush()).is_ok()
}

/// Writes to standard error without a line end; never panics.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = $crate::console::err(format_args!($($arg)*));
    }};
}

/// Writes a line to standard error; never panics.
#[macro_export]
macro_rules! errln {
    () => {{
        let _ = $crate::console::err(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        let _ = $crate::console::err(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_report_success() {
        assert!(super::err(format_args!("")));
    }
}
