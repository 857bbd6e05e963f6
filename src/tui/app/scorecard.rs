//! The Scorecard tab's state: the frameworks' cards, what this device found, and the tab's keys.

use super::*;

/// The Scorecard tab's state: the curated cards, what was probed here, the runtime phase of the
/// open results directory, joined.
#[derive(Debug, Clone, Default)]
pub struct ScorecardView {
    pub cards: Vec<edgeprof::scorecard::cards::Card>,
    /// Why the cards could not be read, or a warning about refreshed figures.
    pub warning: Option<String>,
    pub here: Option<Vec<edgeprof::scorecard::here::Here>>,
    pub probing: bool,
    pub entries: Vec<edgeprof::scorecard::Entry>,
    pub selected: usize,
    /// Lines scrolled in the selected framework's table.
    pub scroll: u16,
}

impl ScorecardView {
    /// Loads the shipped cards with any refreshed GitHub figures.
    pub fn load() -> ScorecardView {
        let (cards, warning) = match edgeprof::scorecard::github::cards_with_refreshed() {
            Ok((cards, warning)) => (cards, warning),
            Err(e) => (Vec::new(), Some(format!("{e:#}"))),
        };
        ScorecardView {
            cards,
            warning,
            ..ScorecardView::default()
        }
    }

    /// Joins the cards, the probe and the results rows again.
    pub fn rejoin(&mut self, rows: &[Row]) {
        let runtimes = edgeprof::scorecard::runtimes(rows);
        self.entries = edgeprof::scorecard::join(
            self.cards.clone(),
            self.here.clone(),
            &runtimes,
            None,
            Vec::new(),
        )
        .frameworks;
        self.selected = self.selected.min(self.entries.len().saturating_sub(1));
    }
}

impl App {
    pub(super) fn scorecard_key(&mut self, key: KeyEvent) -> Option<Command> {
        let v = &mut self.scorecard;
        let n = v.entries.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                v.selected = v.selected.saturating_sub(1);
                v.scroll = 0;
            }
            KeyCode::Down | KeyCode::Char('j') => {
                v.selected = (v.selected + 1).min(n.saturating_sub(1));
                v.scroll = 0;
            }
            KeyCode::PageDown | KeyCode::Char(' ') => v.scroll = v.scroll.saturating_add(10),
            KeyCode::PageUp => v.scroll = v.scroll.saturating_sub(10),
            KeyCode::Home => v.scroll = 0,
            KeyCode::Char('p') => {
                if v.probing {
                    self.say(Severity::Warn, "already probing this device");
                    return None;
                }
                v.probing = true;
                self.say(
                    Severity::Info,
                    "probing the frameworks here (each framework's Python is asked) …",
                );
                return Some(Command::ProbeFrameworks);
            }
            _ => {}
        }
        None
    }

    /// The probe of this device finished.
    pub fn frameworks_probed(&mut self, found: Vec<edgeprof::scorecard::here::Here>) {
        let installed = found
            .iter()
            .filter(|h| {
                matches!(
                    h.state,
                    edgeprof::scorecard::here::State::BuiltIn
                        | edgeprof::scorecard::here::State::Installed
                )
            })
            .count();
        let total = found.len();
        self.scorecard.here = Some(found);
        self.scorecard.probing = false;
        self.scorecard.rejoin(&self.results.rows);
        self.say(
            Severity::Info,
            format!("{installed} of {total} frameworks are built in or installed here"),
        );
    }
}
