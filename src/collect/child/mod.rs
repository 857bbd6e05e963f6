//! The supervisor of every child process edgeprof starts. A [`Spec`] says what to start (the
//! program, its arguments, environment, directory and CPUs); every child it makes runs in a
//! process group of its own (so that what it starts can be killed with it, and a terminal's
//! Ctrl-C reaches edgeprof alone), dies with the thread that started it (parent-death signal),
//! and is confined to its CPUs, all set before exec, so before any engine creates its threads.
//!
//! Two ways to run one:
//! - [`run`] / [`run_until`] for short-lived children (a framework's probe, a model converter,
//!   a profiler, `vcgencmd`): its input is written from a thread of its own while its output is
//!   read, what it prints is kept up to a bound (its last bytes) or streamed into a file, and
//!   it is waited for in one blocking call until it exits or its time is up, when its whole
//!   group is killed.
//! - [`Spec::start`] for children that speak while they run (workers with a protocol, training
//!   launchers, pip, the GPU benchmark, a placement unit): what they say on stdout arrives as
//!   [`Heard`] lines on the caller's own channel, each cut at a bound, together with their exit
//!   (from a thread blocked in `waitid`, never a poll) and a raised cancel; stderr's last lines
//!   are kept for the failure report; the caller's loop decides deadlines and signals the group,
//!   and reaps with `wait4` for the kernel's own peak RSS and CPU time.

mod short;
mod streams;

pub use short::{ask_worker, run, run_until, said, AskError, Ran, Stdout, STDOUT_LIMIT};
pub use streams::STDERR_TAIL_LINES;
use streams::{for_each_line, Tail};

use crate::collect::stop::{Cancel, OnRaise};
use crate::error::ChildFailed;
use nix::sys::signal::Signal;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// What to start: a program with its arguments, environment, working directory and CPUs.
#[derive(Debug, Clone)]
pub struct Spec {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    dir: Option<PathBuf>,
    cpus: Option<Vec<usize>>,
    outlives: bool,
}

impl Spec {
    pub fn new(program: impl AsRef<OsStr>) -> Spec {
        Spec {
            program: PathBuf::from(program.as_ref()),
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
            cpus: None,
            outlives: false,
        }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Spec {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Spec
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Spec {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Spec
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Spec {
        self.dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Confines it (and every thread and process it starts) to `cpus`.
    pub fn on_cpus(&mut self, cpus: &[usize]) -> &mut Spec {
        self.cpus = Some(cpus.to_vec());
        self
    }

    /// Lets it outlive edgeprof: only for the guard whose work starts when edgeprof dies.
    pub fn outliving_edgeprof(&mut self) -> &mut Spec {
        self.outlives = true;
        self
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn get_args(&self) -> impl Iterator<Item = &OsStr> {
        self.args.iter().map(OsString::as_os_str)
    }

    /// The command that starts it: its own process group, the parent-death signal and its CPUs
    /// set in the child before exec. Err when a CPU cannot be named in a CPU set.
    fn command(&self) -> Result<Command, ChildFailed> {
        let affinity = match &self.cpus {
            Some(cpus) => {
                let mut set = nix::sched::CpuSet::new();
                for &cpu in cpus {
                    set.set(cpu)
                        .map_err(|e| ChildFailed(format!("cannot confine it to CPU {cpu}: {e}")))?;
                }
                Some(set)
            }
            None => None,
        };
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(0);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        let dies_with_edgeprof = !self.outlives;
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe system calls (prctl, sched_setaffinity) on data made before the
        // fork.
        unsafe {
            command.pre_exec(move || {
                if dies_with_edgeprof {
                    // If edgeprof dies, the child (and, by its group, what it started) goes too.
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                        .map_err(std::io::Error::from)?;
                }
                if let Some(set) = &affinity {
                    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set)
                        .map_err(std::io::Error::from)?;
                }
                Ok(())
            });
        }
        Ok(command)
    }

    /// Starts it on this process's terminal (stdin, stdout and stderr inherited) for the caller
    /// to wait on: a command the user gave to run (`board lock -- COMMAND`). It has its own
    /// process group, so the terminal's Ctrl-C reaches edgeprof, which passes it on.
    pub fn spawn_attached(&self) -> Result<std::process::Child, ChildFailed> {
        self.command()?
            .spawn()
            .map_err(|e| ChildFailed(format!("cannot start {}: {e}", self.program.display())))
    }

    /// The same, for a child an async loop supervises (a fleet node's ssh session).
    pub fn tokio_command(&self) -> Result<tokio::process::Command, ChildFailed> {
        Ok(tokio::process::Command::from(self.command()?))
    }

    /// Starts it: what it writes on stdout reaches `to` as [`Heard`] lines (or is left to the
    /// caller, [`Output::Taken`]), its exit and a raised `cancel` too; stderr's last lines are
    /// kept. The child dies with the thread that calls this.
    pub fn start<T: From<Heard> + Send + 'static>(
        &self,
        stdin: Input,
        stdout: Output,
        to: &Sender<T>,
        cancel: Option<&Cancel>,
    ) -> Result<Started, ChildFailed> {
        self.start_mapped(stdin, stdout, to, |h| Some(T::from(h)), cancel)
    }

    /// [`Spec::start`], what is heard passed through `map` (which may tag it with the child it
    /// came from, parse it, or drop it) on its way to `to`.
    pub fn start_mapped<T: Send + 'static>(
        &self,
        stdin: Input,
        stdout: Output,
        to: &Sender<T>,
        map: impl Fn(Heard) -> Option<T> + Send + Sync + 'static,
        cancel: Option<&Cancel>,
    ) -> Result<Started, ChildFailed> {
        let send = move |tx: &Sender<T>, heard: Heard| match map(heard) {
            Some(t) => tx.send(t).is_ok(),
            None => true,
        };
        let send = std::sync::Arc::new(send);
        let mut command = self.command()?;
        command
            .stdin(match stdin {
                Input::Null => Stdio::null(),
                Input::Piped => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| ChildFailed(e.to_string()))?;
        let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        let tail = Tail::default();
        let mut taken = None;
        // The streams heard as lines (stderr's lines kept as its tail too when merged), and
        // stderr read into the tail alone otherwise.
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let mut heard: Vec<(Box<dyn std::io::Read + Send>, Option<Tail>)> = Vec::new();
        let mut tail_only = None;
        let max = match stdout {
            Output::Lines { max } => {
                heard.extend(out.map(|o| (Box::new(o) as Box<dyn std::io::Read + Send>, None)));
                tail_only = err;
                max
            }
            Output::Merged { max } => {
                heard.extend(out.map(|o| (Box::new(o) as Box<dyn std::io::Read + Send>, None)));
                heard.extend(err.map(|e| {
                    (
                        Box::new(e) as Box<dyn std::io::Read + Send>,
                        Some(tail.clone()),
                    )
                }));
                max
            }
            Output::Taken => {
                taken = out;
                tail_only = err;
                0
            }
        };
        if let Some(err) = tail_only {
            let tail = tail.clone();
            std::thread::spawn(move || tail.fill(err));
        }
        // The last of the heard streams to end sends `Closed`: counted before any starts.
        let open = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(heard.len()));
        if heard.is_empty() && !matches!(stdout, Output::Taken) {
            send(to, Heard::Closed);
        }
        for (stream, also) in heard {
            let (tx, open, send) = (
                to.clone(),
                std::sync::Arc::clone(&open),
                std::sync::Arc::clone(&send),
            );
            std::thread::spawn(move || {
                for_each_line(stream, max, |line, dropped| {
                    if let Some(tail) = &also {
                        tail.push(&line);
                    }
                    let heard = if dropped > 0 {
                        Heard::Overlong
                    } else {
                        Heard::Line(line)
                    };
                    let overlong = matches!(heard, Heard::Overlong);
                    send(&tx, heard) && !overlong
                });
                if let Some(tail) = &also {
                    tail.end();
                }
                if open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                    send(&tx, Heard::Closed);
                }
            });
        }
        let mut started = Started {
            child,
            pid,
            stdout: taken,
            tail,
            reaped: false,
            _cancel: None,
        };
        // Told, never polled: a thread blocked in waitid (which leaves the child unreaped, so a
        // kill cannot reach a reused pid).
        let (exit_tx, exit_send) = (to.clone(), std::sync::Arc::clone(&send));
        if let Err(e) = crate::collect::exit::notify(started.pid(), move || {
            exit_send(&exit_tx, Heard::Exited);
        }) {
            // Dropping it kills its group and reaps it.
            drop(started);
            return Err(ChildFailed(format!("cannot watch it for its exit: {e}")));
        }
        if let Some(cancel) = cancel {
            let (tx, send) = (to.clone(), std::sync::Arc::clone(&send));
            started._cancel = Some(cancel.on_raise(move || {
                send(&tx, Heard::Cancelled);
            }));
        }
        Ok(started)
    }
}

/// A started child's stdin.
pub enum Input {
    Null,
    /// Open for the caller ([`Started::take_stdin`]).
    Piped,
}

/// What becomes of a started child's stdout.
#[derive(Clone, Copy)]
pub enum Output {
    /// Read line by line, each cut to `max` bytes (a longer one is [`Heard::Overlong`] and ends
    /// the reading).
    Lines { max: usize },
    /// Both stdout and stderr read line by line (a setup step's progress and complaints), the
    /// stderr lines also kept as its tail; `Closed` once both have ended.
    Merged { max: usize },
    /// Left to the caller ([`Started::take_stdout`]): a binary answer stream.
    Taken,
}

/// What a started child's supervisor hears, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    Line(String),
    /// A line passed its bound; nothing more is read.
    Overlong,
    /// Its stdout ended.
    Closed,
    /// It exited (not reaped yet).
    Exited,
    /// The cancel was raised.
    Cancelled,
}

/// A started child, its group killed and the child reaped when dropped unreaped.
pub struct Started {
    child: Child,
    pid: i32,
    stdout: Option<ChildStdout>,
    tail: Tail,
    reaped: bool,
    _cancel: Option<OnRaise>,
}

/// A reaped child: its exit status and the kernel's account of what it used.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    pub status: ExitStatus,
    /// Its peak resident set (ru_maxrss), bytes.
    pub maxrss_bytes: u64,
    pub user_s: f64,
    pub system_s: f64,
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

impl Started {
    /// Hears it to its end: each line it says passed to `on_line`, until its output has closed
    /// and it has exited (a cancel is not its end). False when `deadline` came first: its group
    /// is killed then, and the caller says so.
    pub fn hear_to_end(
        &self,
        heard: &std::sync::mpsc::Receiver<Heard>,
        deadline: std::time::Instant,
        mut on_line: impl FnMut(String),
    ) -> bool {
        use std::sync::mpsc::RecvTimeoutError;
        let (mut closed, mut exited) = (false, false);
        while !(closed && exited) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match heard.recv_timeout(left) {
                Ok(Heard::Line(line)) => on_line(line),
                Ok(Heard::Closed | Heard::Overlong) => closed = true,
                Ok(Heard::Exited) => exited = true,
                Ok(Heard::Cancelled) => {}
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    self.signal_group(Signal::SIGKILL);
                    return false;
                }
            }
        }
        true
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The last lines of its stderr, once the stream has ended or `wait` has passed.
    pub fn stderr(&self, wait: Duration) -> String {
        self.tail.text(wait)
    }

    /// Sends `signal` to it alone (nothing once it is reaped: its pid may then be another's).
    pub fn signal(&self, signal: Signal) {
        if !self.reaped {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), signal);
        }
    }

    /// Sends `signal` to its whole process group (nothing once it is reaped: the group's id may
    /// then be another's).
    pub fn signal_group(&self, signal: Signal) {
        if !self.reaped {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pid), signal);
        }
    }

    /// Reaps it if it has ended, without blocking.
    pub fn try_reap(&mut self) -> std::io::Result<Option<Reaped>> {
        self.wait4(libc::WNOHANG)
    }

    /// Reaps it, blocking until it ends.
    pub fn reap(&mut self) -> std::io::Result<Reaped> {
        loop {
            match self.wait4(0) {
                Ok(Some(r)) => return Ok(r),
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn wait4(&mut self, flags: libc::c_int) -> std::io::Result<Option<Reaped>> {
        if self.reaped {
            return Err(std::io::Error::other("it was reaped already"));
        }
        let mut status: libc::c_int = 0;
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: wait4 only writes the status and the rusage buffer, both owned here and sized
        // for it; the pid is our own child, which std's Child never reaps behind our back since
        // its wait methods are never called.
        let r = unsafe { libc::wait4(self.pid, &mut status, flags, usage.as_mut_ptr()) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        // SAFETY: wait4 returned the child, so it filled the zero-initialised rusage.
        let usage = unsafe { usage.assume_init() };
        Ok(Some(Reaped {
            status: ExitStatus::from_raw(status),
            // Linux reports ru_maxrss in KiB.
            maxrss_bytes: u64::try_from(usage.ru_maxrss)
                .unwrap_or(0)
                .saturating_mul(1024),
            user_s: seconds(usage.ru_utime),
            system_s: seconds(usage.ru_stime),
        }))
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.signal_group(Signal::SIGKILL);
        // Reaped on a thread of its own: a child stuck in the kernel must not hold its owner.
        let pid = self.pid;
        std::thread::spawn(move || {
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid only writes the status owned here; the pid is still our
            // unreaped child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn sh(script: &str) -> Spec {
        let mut spec = Spec::new("sh");
        spec.args(["-c", script]);
        spec
    }

    #[test]
    fn a_started_child_is_heard_line_by_line_then_reaped_with_its_usage() {
        let (tx, rx) = mpsc::channel::<Heard>();
        let mut child = match sh("echo one; echo two >&2; exit 3").start(
            Input::Null,
            Output::Lines { max: 100 },
            &tx,
            None,
        ) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        drop(tx);
        let heard: Vec<Heard> = rx.iter().collect();
        // Exit is heard on a thread of its own, so it may come before or after the
        // output; the output itself comes in order and ends with its close.
        let output: Vec<&Heard> = heard.iter().filter(|h| **h != Heard::Exited).collect();
        assert_eq!(output, [&Heard::Line("one".into()), &Heard::Closed]);
        assert!(heard.contains(&Heard::Exited), "{heard:?}");
        let reaped = match child.reap() {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(reaped.status.code(), Some(3));
        assert!(reaped.maxrss_bytes > 0);
        assert_eq!(child.stderr(Duration::from_secs(5)), "two");
    }

    #[test]
    fn a_child_runs_on_the_cpus_it_is_given() {
        let allowed = match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
            Ok(set) => set,
            Err(e) => panic!("{e}"),
        };
        let Some(cpu) = (0..nix::sched::CpuSet::count()).find(|&c| allowed.is_set(c) == Ok(true))
        else {
            panic!("no CPU allowed");
        };
        let (tx, rx) = mpsc::channel::<Heard>();
        let mut spec = sh("grep Cpus_allowed_list /proc/self/status");
        spec.on_cpus(&[cpu]);
        let _child = match spec.start(Input::Null, Output::Lines { max: 100 }, &tx, None) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        drop(tx);
        let line = rx.iter().find_map(|h| match h {
            Heard::Line(l) => Some(l),
            _ => None,
        });
        assert_eq!(
            line.as_deref().map(|l| l.split_whitespace().last()),
            Some(Some(cpu.to_string().as_str()))
        );
    }

    #[test]
    fn a_raised_cancel_is_heard_and_dropping_kills_the_group() {
        let (tx, rx) = mpsc::channel::<Heard>();
        let cancel = Cancel::new();
        let child = match sh("sleep 30 & sleep 30").start(
            Input::Null,
            Output::Lines { max: 100 },
            &tx,
            Some(&cancel),
        ) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        cancel.raise();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Heard::Cancelled)
        );
        drop(tx);
        drop(child);
        // The grandchild held stdout open: its end says the whole group went.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut rest = Vec::new();
        while let Ok(h) =
            rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            rest.push(h);
        }
        assert!(
            rest.contains(&Heard::Closed) && rest.contains(&Heard::Exited),
            "{rest:?}"
        );
    }
}
