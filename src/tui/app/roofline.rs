//! The Roofline tab's state: the ceilings and points of each processor, the chosen program and a
//! condition's layers.

use super::*;

/// What a pane of the tab shows: its content, or a line in its place (work under way, or what
/// to do to get the content).
#[derive(Debug, Clone)]
pub enum Shown<T> {
    Ready(T),
    Note(String),
}

impl<T> From<Result<T, String>> for Shown<T> {
    fn from(result: Result<T, String>) -> Shown<T> {
        match result {
            Ok(t) => Shown::Ready(t),
            Err(why) => Shown::Note(why),
        }
    }
}

/// The per-layer drill-down of one condition: its layers ranked by the end-to-end time they can
/// save, time share × (1 − 1/headroom).
#[derive(Debug, Clone, Default)]
pub struct LayersView {
    pub condition: String,
    /// In rank order (the chart's A, B, C … are the first).
    pub programs: Vec<Program>,
    pub ranks: Vec<edgeprof::roofline::advice::LayerRank>,
    pub selected: usize,
}

/// Layers drawn on the chart.
pub const LAYER_MARKS: usize = 8;

/// The Roofline tab's state.
#[derive(Debug, Clone, Default)]
pub struct RooflineView {
    /// The stored conditions (for the drill-down) and the sweep's class count.
    pub conditions: Vec<edgeprof::protocol::Condition>,
    pub classes: usize,
    /// The drill-down: None shows the sweep's programs; a note says why there is none or that
    /// it is being profiled.
    pub layers: Option<Shown<LayersView>>,
    /// This device's ceilings and where they came from, or why there are none.
    pub ceilings: Option<Shown<(Ceilings, String)>>,
    pub programs: Vec<Program>,
    pub analyses: Vec<Result<Analysis, String>>,
    pub left_out: Vec<(String, String)>,
    pub selected: usize,
    pub precision: Option<Precision>,
    /// Whose roofline is shown: the CPU's (the sweep's conditions) or GPU 0's (the GPU profiles
    /// kept in the results directory); `g` swaps in the other side.
    pub processor: edgeprof::roofline::Processor,
    pub other: RooflineSide,
    /// Lines of the advice scrolled past (PgUp/PgDn).
    pub advice_scroll: u16,
}

/// The side of the Roofline tab not shown: its ceilings and points.
#[derive(Debug, Clone, Default)]
pub struct RooflineSide {
    pub ceilings: Option<Shown<(Ceilings, String)>>,
    pub programs: Vec<Program>,
    pub left_out: Vec<(String, String)>,
}

impl RooflineView {
    /// Shows the other processor's side.
    pub fn swap_side(&mut self) {
        std::mem::swap(&mut self.ceilings, &mut self.other.ceilings);
        std::mem::swap(&mut self.programs, &mut self.other.programs);
        std::mem::swap(&mut self.left_out, &mut self.other.left_out);
        self.processor = match self.processor {
            edgeprof::roofline::Processor::Cpu => edgeprof::roofline::Processor::Gpu,
            edgeprof::roofline::Processor::Gpu => edgeprof::roofline::Processor::Cpu,
        };
        self.selected = 0;
        self.layers = None;
    }

    /// A side's ceilings, shown or not.
    pub fn ceilings_of(
        &mut self,
        processor: edgeprof::roofline::Processor,
    ) -> &mut Option<Shown<(Ceilings, String)>> {
        if processor == self.processor {
            &mut self.ceilings
        } else {
            &mut self.other.ceilings
        }
    }

    /// A side's points, shown or not.
    pub fn points_of(
        &mut self,
        processor: edgeprof::roofline::Processor,
    ) -> (&mut Vec<Program>, &mut Vec<(String, String)>) {
        if processor == self.processor {
            (&mut self.programs, &mut self.left_out)
        } else {
            (&mut self.other.programs, &mut self.other.left_out)
        }
    }
}

impl App {
    /// Re-analyses the roofline's programs against its ceilings.
    pub fn refresh_roofline(&mut self) {
        let rv = &mut self.roofline;
        rv.analyses = match &rv.ceilings {
            Some(Shown::Ready((c, _))) => rv
                .programs
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    if let Some(precision) = rv.precision {
                        p.precision = precision;
                    }
                    edgeprof::roofline::advice::analyse(&p, c).map_err(|e| e.to_string())
                })
                .collect(),
            _ => Vec::new(),
        };
    }

    /// The layers of the drill-down, profiled (or why not).
    pub fn layers_profiled(&mut self, condition: String, profiled: Shown<Vec<Program>>) {
        let rv = &mut self.roofline;
        let shown = match profiled {
            Shown::Note(why) => Shown::Note(why),
            Shown::Ready(programs) => match &rv.ceilings {
                Some(Shown::Ready((ceilings, _))) => {
                    let ranks = edgeprof::roofline::advice::rank_layers(&programs, ceilings);
                    if ranks.is_empty() {
                        Shown::Note(format!("{condition}: no layer could be placed"))
                    } else {
                        let ordered = ranks
                            .iter()
                            .filter_map(|r| programs.iter().find(|p| p.label == r.label).cloned())
                            .collect();
                        Shown::Ready(LayersView {
                            condition,
                            programs: ordered,
                            ranks,
                            selected: 0,
                        })
                    }
                }
                _ => Shown::Note("no ceilings to rank the layers against: press m first".into()),
            },
        };
        rv.layers = Some(shown);
    }
}
