//! `edgeprof monitor` (a headless telemetry logger) and `edgeprof probe` (which sources work
//! here). Sampling happens in the collect layer; this module schedules, formats and prints.

use crate::cli::{print_json, print_out, render, BadInput};
use edgeprof::collect::tegrastats::ReplayError;
use edgeprof::collect::telemetry::{self, Reader, Sample};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A duration such as `100ms`, `1s`, `1.5s`, `2m`, `1h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, edgeprof::error::BadInput> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 100ms, 2s or 5m"))?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "" | "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(edgeprof::error::BadInput::from(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m or h)"
            )))
        }
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e7) {
        return Err(edgeprof::error::BadInput::from(format!(
            "{text:?} must be a positive duration"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Jsonl,
    Csv,
}

pub struct MonitorOptions {
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub format: Format,
    pub pid: Option<u32>,
    pub root: PathBuf,
    pub from_tegrastats: Option<PathBuf>,
}

/// Writes samples as they come: JSON lines, or CSV whose columns are fixed by the first sample.
struct Output {
    format: Format,
    columns: Option<Vec<String>>,
}

impl Output {
    fn write(&mut self, sample: &Sample) -> anyhow::Result<()> {
        let line = match self.format {
            Format::Jsonl => serde_json::to_string(sample)?,
            Format::Csv => {
                let mut text = String::new();
                if self.columns.is_none() {
                    let columns = telemetry::csv_columns(std::slice::from_ref(sample));
                    text.push_str(&edgeprof::text::csv_record(&columns));
                    text.push('\n');
                    self.columns = Some(columns);
                }
                let columns = self.columns.as_deref().unwrap_or_default();
                text.push_str(&telemetry::csv_row(columns, sample));
                text
            }
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|_| out.flush())
            .map_err(|e| anyhow::anyhow!("cannot write the samples (stdout closed?): {e}"))
    }
}

/// `edgeprof monitor`.
pub fn monitor(o: MonitorOptions) -> anyhow::Result<()> {
    let mut output = Output {
        format: o.format,
        columns: None,
    };
    if let Some(path) = &o.from_tegrastats {
        return replay_tegrastats(path, o.interval, &mut output);
    }
    let start = Instant::now();
    let mut process = match o.pid {
        Some(pid) => {
            let mut sampler = edgeprof::collect::proc::ProcessSampler::new(&o.root, pid, start);
            if sampler.sample(start).is_none() {
                anyhow::bail!(BadInput(format!("no process {pid} to monitor")));
            }
            Some((pid, sampler))
        }
        None => None,
    };
    let mut active: Vec<Box<dyn Reader>> = Vec::new();
    for reader in telemetry::readers(&o.root) {
        match reader.probe() {
            Ok(_) => active.push(reader),
            Err(why) => errln!("{}: unavailable: {why}", reader.name()),
        }
    }
    // The loop is one current-thread runtime: it sleeps to each sample's deadline and wakes
    // early only for SIGINT or SIGTERM, which end the log cleanly.
    let runtime = super::runtime()?;
    let mut signals = {
        let _inside = runtime.enter();
        Stopping::new().map_err(|e| anyhow::anyhow!("cannot install the signal handler: {e}"))?
    };
    errln!(
        "sampling every {} ms{}; Ctrl-C stops",
        o.interval.as_millis(),
        o.duration
            .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
    );
    let mut schedule = telemetry::Sampler::new(active, o.interval);
    let result = runtime.block_on(sample_until_done(
        &o,
        &mut schedule,
        &mut process,
        &mut signals,
        &mut output,
    ));
    // Readings left out as implausible, once at the end rather than on every sample.
    for reader in schedule.readers() {
        let dropped = reader.dropped();
        if let Some(first) = dropped.first {
            errln!(
                "warning: {}: dropped {} implausible reading(s) (first: {first})",
                reader.name(),
                dropped.count
            );
        }
    }
    result
}

/// The signals that end a headless log, and the alarm it sleeps to each sample with.
struct Stopping {
    interrupt: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    alarm: edgeprof::collect::alarm::Alarm,
}

impl Stopping {
    /// Installs the handlers (inside the runtime).
    fn new() -> std::io::Result<Stopping> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Stopping {
            interrupt: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            alarm: edgeprof::collect::alarm::Alarm::new()?,
        })
    }

    /// Sleeps until `deadline`; false when a signal came first.
    async fn sleep_until(&mut self, deadline: Instant) -> anyhow::Result<bool> {
        tokio::select! {
            slept = self.alarm.sleep_until(deadline) => {
                slept.map_err(|e| anyhow::anyhow!("cannot wait for the next sample: {e}"))?;
                Ok(true)
            }
            _ = self.interrupt.recv() => Ok(false),
            _ = self.term.recv() => Ok(false),
        }
    }
}

/// The sampling loop of `monitor`, until its duration is over, a signal comes or the
/// monitored process ends.
async fn sample_until_done(
    o: &MonitorOptions,
    schedule: &mut telemetry::Sampler,
    process: &mut Option<(u32, edgeprof::collect::proc::ProcessSampler)>,
    signals: &mut Stopping,
    output: &mut Output,
) -> anyhow::Result<()> {
    loop {
        if o.duration.is_some_and(|d| schedule.next_offset() > d)
            || !signals.sleep_until(schedule.next_due()).await?
        {
            return Ok(());
        }
        let now = Instant::now();
        let mut sample = schedule.take();
        if let Some((pid, sampler)) = process {
            let state = std::fs::read_to_string(o.root.join(format!("proc/{pid}/stat")))
                .ok()
                .and_then(|t| edgeprof::collect::proc::parse_stat_state(&t));
            let alive = !matches!(state, Some('Z' | 'X') | None);
            match sampler.sample(now).filter(|_| alive) {
                Some(p) => sample.process = Some(p),
                None => {
                    errln!("process {pid} has ended");
                    return Ok(());
                }
            }
        }
        output.write(&sample)?;
    }
}

/// `edgeprof monitor --from-tegrastats FILE`: the log's lines as samples, read and written one
/// at a time (a log of gigabytes is never held whole).
fn replay_tegrastats(path: &Path, interval: Duration, output: &mut Output) -> anyhow::Result<()> {
    let file = std::fs::File::open(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    let name = path.display().to_string();
    let replay = edgeprof::collect::tegrastats::replay(
        std::io::BufReader::new(file),
        interval,
        |sample| output.write(&sample),
        |line, warning| match line {
            Some(n) => errln!("warning: {name}:{n}: {warning}"),
            None => errln!("warning: {name}: {warning}"),
        },
    )
    .map_err(|e| match e {
        ReplayError::Read(io) => anyhow::Error::new(BadInput(format!("cannot read {name}: {io}"))),
        ReplayError::Emit(e) => e,
    })?;
    if let Some((line, reading)) = &replay.first_dropped {
        errln!(
            "warning: {name}: dropped {} implausible field(s) (first at line {line}: {reading})",
            replay.dropped
        );
    }
    if replay.samples == 0 {
        anyhow::bail!(BadInput(format!("{name} holds no tegrastats line")));
    }
    Ok(())
}

/// `edgeprof probe`: every telemetry source, tool and framework, available or not and why.
pub fn probe(root: &Path, json: bool) -> anyhow::Result<()> {
    let entries = edgeprof::probe::sources(root);
    if json {
        return print_json(&entries);
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            vec![
                e.source.to_string(),
                if e.available {
                    "available"
                } else {
                    "unavailable"
                }
                .to_string(),
                e.detail.clone(),
            ]
        })
        .collect();
    print_out(&render::table(
        &["source", "status", "detail"],
        &[false, false, false],
        &rows,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
