//! The Monitor tab: the board's live telemetry — every core's load history and clock, the GPU's
//! load, memory on a scale that shows its changes, and the facts of the moment: load average,
//! uptime, swap, every GPU, power, every temperature and rail, throttling.

use super::*;

pub(super) fn draw_monitor(frame: &mut Frame, app: &App, area: Rect) {
    let live = &app.monitor;
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
    let settings = &app.monitor_settings;
    let title = if settings.paused {
        "CPU per core · PAUSED".to_string()
    } else {
        format!(
            "CPU per core · every {}",
            crate::tui::app::duration_text(settings.interval)
        )
    };
    // The cores as many rows as they need (a third of the height at least for the
    // processes below them).
    let core_rows = live.last.as_ref().map_or(1, |s| s.cores.len().max(1)) as u16 + 2;
    let [cores, processes] = Layout::vertical([
        Constraint::Max(core_rows.min(left.height.saturating_mul(2) / 3)),
        Constraint::Min(0),
    ])
    .areas(left);
    let b = block(app, &title, false);
    let inner = b.inner(cores);
    frame.render_widget(b, cores);
    frame.render_widget(
        Paragraph::new(core_lines(app, live, inner.width as usize)),
        inner,
    );
    process_panel(frame, app, processes);
    let [gpu, mem, facts] = Layout::vertical([
        Constraint::Ratio(1, 4),
        Constraint::Ratio(1, 4),
        Constraint::Ratio(2, 4),
    ])
    .areas(right);
    gpu_panel(frame, app, gpu, &live.gpus);
    memory_panel(frame, app, mem, &live.mem_used_mib);
    let b = block(app, "Load, memory, GPUs, power, temperatures", false);
    let inner = b.inner(facts);
    frame.render_widget(b, facts);
    let mut lines = match &live.last {
        Some(s) => fact_lines(app, s),
        None => vec![Line::from(Span::styled(
            "waiting for the first sample",
            app.theme.muted(),
        ))],
    };
    lines.extend(state_lines(app));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
}

/// Memory used over time, on a scale from a little below the lowest value shown to a little
/// above the highest: scaled to the whole memory, a board's few-MiB changes would draw a flat
/// line.
pub(super) fn memory_panel(frame: &mut Frame, app: &App, area: Rect, data: &VecDeque<f64>) {
    let b = block(app, "memory used", false);
    let inner = b.inner(area);
    let shown = tail(data, inner.width as usize);
    let (Some(&low), Some(&high)) = (shown.iter().min(), shown.iter().max()) else {
        frame.render_widget(b, area);
        frame.render_widget(
            Paragraph::new(Span::styled("waiting for samples", app.theme.muted())),
            inner,
        );
        return;
    };
    // A margin of a tenth of the range (at least 1 MiB) on both sides, the floor not below 0.
    let margin = ((high - low) / 10).max(1);
    let floor = low.saturating_sub(margin);
    let top = high + margin;
    let now = shown.last().copied().unwrap_or(0);
    let mut label = format!("memory used {now} MiB (scale {floor}–{top})");
    // Shorter on a narrow panel: the scale in brief, then none (the chart still spans it).
    for shorter in [
        format!("memory {now} MiB ({floor}–{top})"),
        format!("memory {now} MiB"),
    ] {
        if label.chars().count() + 4 > usize::from(area.width) {
            label = shorter;
        }
    }
    let b = block(app, &label, false);
    frame.render_widget(b, area);
    let lifted: Vec<u64> = shown.iter().map(|v| v - floor).collect();
    frame.render_widget(sparkline(app, &lifted, Some(top - floor), 1), inner);
}

/// The processes, most first by the chosen figure; edgeprof's own (a sweep's workers) stand
/// out.
fn process_panel(frame: &mut Frame, app: &App, area: Rect) {
    let sort = app.monitor_settings.sort;
    let title = format!("Processes by {} (s: sort)", sort.name());
    let b = block(app, &title, false);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let Some(sample) = app
        .monitor
        .last
        .as_ref()
        .filter(|s| !s.processes.is_empty())
    else {
        frame.render_widget(
            Paragraph::new(Span::styled(
                "listing at the next sample",
                app.theme.muted(),
            )),
            inner,
        );
        return;
    };
    let rows = crate::tui::app::process_rows(sample, sort);
    let with_gpu = rows.iter().any(|r| r.1.is_some());
    // pid, CPU, memory and GPU memory take fixed columns; the name what is left.
    let fixed = 7 + 6 + 6 + if with_gpu { 6 } else { 0 };
    let name_width = (inner.width as usize).saturating_sub(fixed).max(4);
    let gpu_cell = |text: String| {
        if with_gpu {
            format!("{text:>6}")
        } else {
            String::new()
        }
    };
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:>6} {:<name_width$}{:>6}{:>6}{}",
            "PID",
            "NAME",
            "CPU%",
            "MEM",
            gpu_cell("GPU".into())
        ),
        app.theme.muted(),
    ))];
    for (p, gpu) in rows.iter().take(inner.height.saturating_sub(1) as usize) {
        let name = edgeprof::text::cut_middle(&p.name, name_width.saturating_sub(1));
        let text = format!(
            "{:>6} {:<name_width$}{:>6.1}{:>6}{}",
            p.pid,
            name,
            p.cpu_pct,
            short_bytes(p.rss_bytes),
            gpu_cell(gpu.map_or("–".to_string(), short_bytes))
        );
        let style = if p.ours {
            app.theme.ok()
        } else {
            app.theme.text()
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Bytes in at most five characters, for a column: "812K", "310M", "1.2G", "12G".
fn short_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    let k = 1024.0;
    match b {
        _ if b < k * k => format!("{:.0}K", b / k),
        _ if b < k * k * k => format!("{:.0}M", b / (k * k)),
        _ if b < 10.0 * k * k * k => format!("{:.1}G", b / (k * k * k)),
        _ => format!("{:.0}G", b / (k * k * k)),
    }
}

/// "3 d 4 h", "2 h 5 min", "12 min".
fn uptime_text(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    let (days, hours, minutes) = (s / 86_400, s / 3600 % 24, s / 60 % 60);
    match (days, hours) {
        (0, 0) => format!("{minutes} min"),
        (0, h) => format!("{h} h {minutes} min"),
        (d, h) => format!("{d} d {h} h"),
    }
}

/// The moment's figures, one subject per line.
/// The board's performance state and what in it makes figures wander.
fn state_lines(app: &App) -> Vec<Line<'static>> {
    let Some(state) = &app.board_state else {
        return Vec::new();
    };
    let warnings = state.warnings();
    // The count first, so a short panel that cuts the rest off still shows it.
    let mut lines = vec![if warnings.is_empty() {
        Line::from(Span::styled(
            format!("clocks: {}", state.summary()),
            app.theme.text(),
        ))
    } else {
        Line::from(Span::styled(
            format!(
                "clocks ({} warning(s), fixes: edgeprof board show): {}",
                warnings.len(),
                state.summary()
            ),
            app.theme.warn(),
        ))
    }];
    lines.extend(
        warnings
            .into_iter()
            .map(|w| Line::from(Span::styled(format!("! {}", w.problem), app.theme.warn()))),
    );
    lines
}

fn fact_lines(app: &App, s: &edgeprof::collect::telemetry::Sample) -> Vec<Line<'static>> {
    let text = |t: String| Line::from(Span::styled(t, app.theme.text()));
    let mut lines = Vec::new();
    let mut system = Vec::new();
    if let Some([one, five, fifteen]) = s.load_avg {
        system.push(format!("load {one:.2} {five:.2} {fifteen:.2}"));
    }
    if let Some(up) = s.uptime_s {
        system.push(format!("up {}", uptime_text(up)));
    }
    if !system.is_empty() {
        lines.push(text(system.join(" · ")));
    }
    let mut memory = Vec::new();
    if let (Some(u), Some(t)) = (s.mem_used_bytes, s.mem_total_bytes) {
        memory.push(format!(
            "memory {} of {}",
            render::bytes(u),
            render::bytes(t)
        ));
    }
    match (s.swap_used_bytes, s.swap_total_bytes) {
        (_, Some(0)) => memory.push("no swap".to_string()),
        (Some(u), Some(t)) => {
            memory.push(format!("swap {} of {}", render::bytes(u), render::bytes(t)))
        }
        _ => {}
    }
    if !memory.is_empty() {
        lines.push(text(memory.join(" · ")));
    }
    for (i, g) in s.gpus.iter().enumerate() {
        let mut parts = vec![format!("GPU{i} {}", g.name)];
        if let Some(l) = g.load_pct {
            parts.push(format!("{l:.0} %"));
        }
        if let Some(f) = g.freq_mhz {
            parts.push(match g.max_freq_mhz {
                Some(max) => format!("{f}/{max} MHz"),
                None => format!("{f} MHz"),
            });
        }
        if let Some(m) = g.mem_used_bytes {
            parts.push(match g.mem_total_bytes {
                Some(t) => format!("{} of {}", render::bytes(m), render::bytes(t)),
                None => render::bytes(m),
            });
        }
        if let Some(t) = g.temp_c {
            parts.push(format!("{t:.0}°C"));
        }
        if let Some(w) = g.power_w {
            parts.push(format!("{w:.1} W"));
        }
        lines.push(text(parts.join(" · ")));
    }
    match s.power_w {
        Some(w) => lines.push(text(format!("power {w:.2} W"))),
        None => lines.push(Line::from(Span::styled(
            match &app.conditions.offer.power {
                Ok(_) => "power: waiting".to_string(),
                Err(why) => format!("power: {why}"),
            },
            app.theme.muted(),
        ))),
    }
    if !s.rails.is_empty() {
        let rails: Vec<String> = s
            .rails
            .iter()
            .map(|r| format!("{} {:.2} W", r.name, r.value))
            .collect();
        lines.push(text(format!("rails {}", rails.join("  "))));
    }
    if s.temperatures.is_empty() {
        lines.push(Line::from(Span::styled(
            "temperatures: no thermal zones readable here",
            app.theme.muted(),
        )));
    } else {
        let temps: Vec<String> = s
            .temperatures
            .iter()
            .map(|t| format!("{} {:.0}°C", t.name, t.value))
            .collect();
        lines.push(text(temps.join("  ")));
    }
    if !s.throttling.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("THROTTLING: {}", s.throttling.join("; ")),
            app.theme.error(),
        )));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::tests::{default_app, sample, snap};
    use crate::tui::app::{ProcessSort, Tab};
    use edgeprof::collect::other_processes::ProcessRow;

    #[test]
    fn monitor_tab() {
        let mut a = default_app();
        a.tab = Tab::Monitor;
        snap("monitor_empty", &a);
        let process = |pid: u32, name: &str, cpu_pct: f64, mib: u64, ours: bool| ProcessRow {
            pid,
            ppid: 1,
            name: name.into(),
            cpu_pct,
            rss_bytes: mib << 20,
            ours,
        };
        for k in 0..40 {
            let mut s = sample(k as f64, (k * 13 % 100) as f64, [55.0, 20.0, 100.0, 0.0]);
            if k == 39 {
                s.throttling = vec!["under-voltage".into()];
                s.load_avg = Some([1.52, 0.90, 0.41]);
                s.uptime_s = Some(200_000.0);
                s.swap_used_bytes = Some(0);
                s.swap_total_bytes = Some(2 << 30);
                // A sweep's worker (ours) on the GPU, a camera pipeline, an idle shell.
                s.processes = vec![
                    process(4242, "edgeprof", 97.0, 310, true),
                    process(812, "gst-launch-1.0", 12.5, 95, false),
                    process(77, "bash", 0.0, 4, false),
                ];
                if let Some(g) = s.gpus.first_mut() {
                    g.processes = vec![(4242, 700 << 20)];
                }
            }
            a.monitor_sample(s);
        }
        snap("monitor", &a);
        // Sorted by memory: the same three, the shell last.
        a.monitor_settings.sort = ProcessSort::Memory;
        let Some(last) = &a.monitor.last else {
            panic!("no sample kept")
        };
        let order: Vec<u32> = crate::tui::app::process_rows(last, ProcessSort::Memory)
            .iter()
            .map(|(p, _)| p.pid)
            .collect();
        assert_eq!(order, [4242, 812, 77]);
        let order: Vec<u32> = crate::tui::app::process_rows(last, ProcessSort::GpuMemory)
            .iter()
            .map(|(p, _)| p.pid)
            .collect();
        assert_eq!(order[0], 4242);
    }

    /// The board's state under the facts: the power mode, clocks and governor in a line, then
    /// each warning with its fix (an Orin Nano in its 15 W mode).
    #[test]
    fn monitor_tab_shows_the_board_state_and_its_warnings() {
        use edgeprof::collect::board;
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boards/orin-jp6");
        let mut a = default_app();
        a.tab = Tab::Monitor;
        a.monitor_sample(sample(1.0, 40.0, [55.0, 20.0, 100.0, 0.0]));
        a.board_state = Some(board::read(&root, &board::FixtureCommands(root.clone())));
        snap("monitor_board_state", &a);
        // A sweep's state goes to the Run tab's log as well.
        let state = a.board_state.clone().map(Box::new);
        if let Some(state) = state {
            a.run_event(crate::tui::app::RunEvent::BoardState(state));
        }
        assert_eq!(
            a.run.log.last().map(|(_, l)| l.as_str()),
            Some(
                "board state: power mode 15W (0), jetson_clocks off, GPU clock limit 625 MHz, \
                 CPU governor schedutil"
            )
        );
    }

    /// A second GPU (an integrated one and a discrete one on the same machine): both listed,
    /// each with its own load chart on the Monitor tab and its load and memory on the Run tab.
    #[test]
    fn every_gpu_in_the_monitor_and_run_tabs() {
        use crate::tui::app::RunEvent;
        use edgeprof::collect::telemetry::Gpu;
        use edgeprof::runner::sweep::SweepEvent;
        let two = |k: usize| {
            let mut s = sample(k as f64, (k * 13 % 100) as f64, [55.0, 20.0, 100.0, 0.0]);
            s.gpus.push(Gpu {
                name: "NVIDIA RTX A2000".into(),
                load_pct: Some((k * 7 % 100) as f64),
                mem_used_bytes: Some((2000 + 10 * k as u64) << 20),
                mem_total_bytes: Some(12 << 30),
                ..Gpu::default()
            });
            s
        };
        let mut a = default_app();
        a.tab = Tab::Monitor;
        for k in 0..40 {
            a.monitor_sample(two(k));
        }
        snap("monitor_two_gpus", &a);
        let shown = super::super::tests::screen(&a, (120, 40));
        for needle in [
            "GPU0 %",
            "GPU1 %",
            "GPU0 jetson gv11b",
            "GPU1 NVIDIA RTX A2000",
        ] {
            assert!(shown.contains(needle), "{needle}:\n{shown}");
        }
        a.tab = Tab::Run;
        a.run_event(RunEvent::Started {
            dir: "results/r".into(),
            total: 1,
            done_before: 0,
            estimates: vec![10.0],
        });
        a.run_event(RunEvent::Sweep(SweepEvent::Start {
            index: 1,
            total: 1,
            condition: edgeprof::protocol::Condition::new(
                "onnxruntime",
                edgeprof::config::ModelRef::Zoo("resnet34".into()),
                edgeprof::models::InputShape::default(),
                1,
                0,
                edgeprof::config::Device::Gpu(1),
            ),
            attempt: 1,
            attempts: 1,
            process: 1,
            processes: 1,
            iterations: 100,
        }));
        for k in 0..40 {
            a.run_event(RunEvent::Sweep(SweepEvent::Telemetry(Box::new(two(k)))));
        }
        snap("run_two_gpus", &a);
        let shown = super::super::tests::screen(&a, (120, 40));
        for needle in ["GPU0 %", "GPU1 %", "GPU0 memory", "GPU1 memory"] {
            assert!(shown.contains(needle), "{needle}:\n{shown}");
        }
    }

    #[test]
    fn uptimes_read_at_a_glance() {
        assert_eq!(super::uptime_text(59.0), "0 min");
        assert_eq!(super::uptime_text(7500.0), "2 h 5 min");
        assert_eq!(super::uptime_text(3.0 * 86_400.0 + 4.0 * 3600.0), "3 d 4 h");
        assert_eq!(super::short_bytes(812 << 10), "812K");
        assert_eq!(super::short_bytes(310 << 20), "310M");
        assert_eq!(super::short_bytes(1288 << 20), "1.3G");
        assert_eq!(super::short_bytes(12 << 30), "12G");
    }
}
