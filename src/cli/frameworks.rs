//! `edgeprof frameworks` (the curated facts: list, show, refresh from GitHub, probe this
//! device) and `edgeprof scorecard` (the three phases joined, as text, Markdown or JSON).

use super::{print_json, print_out, render};
use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use edgeprof::report::scorecard as view;
use edgeprof::scorecard;
use edgeprof::scorecard::cards::{self, Card};
use edgeprof::scorecard::github::{self, RepoOutcome, Status};
use edgeprof::scorecard::here::{self, Here};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum FrameworksCommand {
    /// Every framework with its last release, API score, GitHub figures and their dates
    List {
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// One framework's development- and deployment-time facts with their sources
    Show {
        /// tract, candle, onnxruntime, pytorch, tensorflow, tflite, ncnn, mnn, openvino, tensorrt
        name: String,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Read stars, forks, contributors, open issues and the latest release from the GitHub REST
    /// API (a token from EDGEPROF_GITHUB_TOKEN or GITHUB_TOKEN raises the rate limit); kept in
    /// the data directory. Offline, it says so and the shipped values stand
    Refresh {
        /// Only these frameworks (default: all)
        names: Vec<String>,
        /// The API's address (default: $EDGEPROF_GITHUB_API, else https://api.github.com)
        #[arg(long, value_name = "URL")]
        api_url: Option<String>,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Which frameworks are built in or installed here, their versions, and the accelerators,
    /// execution providers or delegates each sees
    Probe {
        /// Only these frameworks (default: all)
        names: Vec<String>,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

#[derive(Args, Debug)]
pub struct ScorecardArgs {
    /// A results directory from `edgeprof run` (or `tune`) for the runtime phase
    results: Option<PathBuf>,
    /// A table for the terminal, Markdown, or JSON
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Write here instead of stdout
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Only these frameworks (repeatable; default: all)
    #[arg(long = "framework", value_name = "NAME")]
    frameworks: Vec<String>,
    /// Leave out the probe of this device (it asks each framework's Python, a few seconds)
    #[arg(long)]
    no_probe: bool,
    /// Wrap text at this many columns (default: the terminal's, else 100)
    #[arg(long)]
    width: Option<usize>,
}

pub fn run(command: FrameworksCommand) -> anyhow::Result<()> {
    match command {
        FrameworksCommand::List { json } => {
            let (cards, warning) = github::cards_with_refreshed()?;
            warn(warning);
            if json {
                return print_json(&cards);
            }
            let rows: Vec<Vec<String>> = cards
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        c.title.clone(),
                        format!(
                            "{} ({})",
                            c.development.last_release.version, c.development.last_release.date
                        ),
                        format!("{}/8", c.development.api.score()),
                        view::github_line(c),
                        c.engine.as_ref().map(|_| "yes").unwrap_or("no").to_string(),
                    ]
                })
                .collect();
            print_out(&render::table(
                &["name", "framework", "last release", "API", "GitHub", "runs"],
                &[false, false, false, true, false, false],
                &rows,
            ))
        }
        FrameworksCommand::Show { name, json } => {
            let (cards, warning) = github::cards_with_refreshed()?;
            warn(warning);
            let card = cards::find(&cards, &name)?.clone();
            if json {
                return print_json(&card);
            }
            let card = scorecard::join(vec![card], None, &Default::default(), None, Vec::new());
            let mut text = String::new();
            for entry in &card.frameworks {
                text.push_str(&view::framework_text(entry, terminal_width(None)));
            }
            text.push('\n');
            text.push_str(&view::rubric());
            print_out(&text)
        }
        FrameworksCommand::Refresh {
            names,
            api_url,
            json,
        } => refresh(&names, api_url, json),
        FrameworksCommand::Probe { names, json } => {
            let cards = selected(cards::shipped()?, &names)?;
            let found = probe(&cards);
            if json {
                return print_json(&found);
            }
            let rows: Vec<Vec<String>> = found
                .iter()
                .map(|h| {
                    vec![
                        h.framework.clone(),
                        h.state.label().to_string(),
                        h.version.clone().unwrap_or_default(),
                        h.devices.join(", "),
                        h.tools.join(", "),
                        h.note.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            print_out(&render::table(
                &["framework", "state", "version", "sees", "tools", "note"],
                &[false; 6],
                &rows,
            ))
        }
    }
}

fn warn(warning: Option<String>) {
    if let Some(w) = warning {
        errln!("edgeprof: warning: {w}");
    }
}

fn selected(cards: Vec<Card>, names: &[String]) -> anyhow::Result<Vec<Card>> {
    if names.is_empty() {
        return Ok(cards);
    }
    names
        .iter()
        .map(|n| cards::find(&cards, n).cloned().map_err(anyhow::Error::from))
        .collect()
}

fn probe(cards: &[Card]) -> Vec<Here> {
    let total = cards.len();
    let mut i = 0;
    here::probe_all(cards, |name| {
        i += 1;
        errln!("[{i}/{total}] probing {name}…");
    })
}

fn refresh(names: &[String], api_url: Option<String>, json: bool) -> anyhow::Result<()> {
    let cards = selected(cards::shipped()?, names)?;
    let api = api_url
        .or_else(|| std::env::var("EDGEPROF_GITHUB_API").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| github::DEFAULT_API.to_string());
    let total = cards.len();
    let (report, cache) = github::refresh_kept(&api, &cards, |i, name, outcome| {
        let what = match outcome {
            RepoOutcome::Read { unchanged, asked } if *unchanged == *asked => {
                "unchanged (every answer was 304)".to_string()
            }
            RepoOutcome::Read { unchanged, .. } => {
                format!("read ({unchanged} answer(s) unchanged)")
            }
            RepoOutcome::Failed { reason } => format!("failed: {reason}; previous values kept"),
            RepoOutcome::NotAsked => "not asked".to_string(),
        };
        errln!("[{}/{total}] {name}: {what}", i + 1);
    })?;
    if json {
        return print_json(&report);
    }
    let mut shown = cards.clone();
    cache.apply(&mut shown);
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                view::github_line(c),
                format!(
                    "{} ({})",
                    c.development.last_release.version, c.development.last_release.date
                ),
            ]
        })
        .collect();
    let mut out = render::table(
        &["framework", "GitHub", "last release"],
        &[false, false, false],
        &rows,
    );
    let read = report
        .repos
        .iter()
        .filter(|r| matches!(r.outcome, RepoOutcome::Read { .. }))
        .count();
    let summary = match report.status {
        Status::Refreshed => format!("refreshed {read} of {total} from {api}"),
        Status::Partial => {
            format!("refreshed {read} of {total} from {api}; the others keep their previous values")
        }
        Status::Offline | Status::RateLimited => format!(
            "{}.\n{read} of {total} refreshed; the others keep the values above (previously \
             refreshed, else shipped)",
            report.stopped.as_deref().unwrap_or("stopped")
        ),
    };
    out.push_str(&format!("\n{summary}\n"));
    if let (Some(remaining), Some(limit)) = (report.rate_remaining, report.rate_limit) {
        out.push_str(&format!(
            "rate limit: {remaining} of {limit} requests left{}{}\n",
            report
                .rate_reset
                .as_deref()
                .map(|r| format!(", resets {r}"))
                .unwrap_or_default(),
            if report.authenticated {
                " (authenticated)"
            } else {
                ""
            }
        ));
    }
    out.push_str(&format!("kept in {}\n", report.cache));
    print_out(&out)
}

/// The terminal's width, or `asked`, or 100.
fn terminal_width(asked: Option<usize>) -> usize {
    asked
        .or_else(|| crossterm::terminal::size().ok().map(|(w, _)| w as usize))
        .filter(|w| *w >= 40)
        .unwrap_or(100)
}

pub fn scorecard_command(args: ScorecardArgs) -> anyhow::Result<()> {
    let (cards, warning) = github::cards_with_refreshed()?;
    let cards = selected(cards, &args.frameworks)?;
    let mut warnings: Vec<String> = warning.into_iter().collect();
    let (info, runtimes) = match &args.results {
        Some(dir) => {
            let (info, runtimes, more) = scorecard::from_results(dir)?;
            warnings.extend(more);
            (Some(info), runtimes)
        }
        None => (None, Default::default()),
    };
    let found = (!args.no_probe).then(|| probe(&cards));
    let card = scorecard::join(cards, found, &runtimes, info, warnings);
    let text = match args.format {
        Format::Text => view::to_text(&card, terminal_width(args.width)),
        Format::Markdown => view::to_markdown(&card),
        Format::Json => {
            serde_json::to_string_pretty(&card).context("cannot encode the scorecard")? + "\n"
        }
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            errln!("scorecard written to {}", path.display());
            Ok(())
        }
        // Markdown and JSON are data to copy; the text is for reading.
        None if matches!(args.format, Format::Text) => print_out(&text),
        None => crate::cli::print_raw(&text),
    }
}
