//! The roofline in the terminal: log-log axes with decade labels, the bandwidth roof of each
//! level bending into the compute roof at its ridge, the compute roofs, and program points
//! marked by letter. Drawn on a braille canvas (2 × 4 dots a cell) or, with `ascii`, one dot a
//! cell in plain characters. Pure: the same input always draws the same text.

use crate::roofline::{Ceilings, Level, Precision, Program};

/// A point to mark: its letter and its position (FLOP/byte, FLOP/s).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub letter: char,
    pub intensity: f64,
    pub flops_per_s: f64,
}

/// The letter of the `index`-th program: A … Z, then again from A.
/// The chart's roofs, for its legend: the flat ones (each precision's compute peak in FLOP/s or,
/// for integers, OP/s; top to bottom) and the slanted ones (bandwidths in bytes/s, left to right,
/// each with its ridge point in FLOP/byte against the peak of `precision`). A roof the ceilings
/// lack is left out.
pub type Roofs = (Vec<(Precision, f64)>, Vec<(Level, f64, f64)>);

pub fn roofs(ceilings: &Ceilings, precision: Precision) -> Roofs {
    let mut flat: Vec<(Precision, f64)> = Precision::ALL
        .iter()
        .filter_map(|&p| ceilings.peak(p).map(|v| (p, v)))
        .collect();
    flat.sort_by(|a, b| b.1.total_cmp(&a.1));
    let peak = ceilings.peak(precision).unwrap_or(0.0);
    let slanted = [Level::L1, Level::L2, Level::L3, Level::Dram]
        .iter()
        .filter_map(|&l| {
            ceilings
                .bandwidth(l)
                .map(|bw| (l, bw, crate::roofline::ridge(peak, bw)))
        })
        .collect();
    (flat, slanted)
}

pub fn letter(index: usize) -> char {
    char::from(b'A' + (index % 26) as u8)
}

/// Marks for programs: one per level with known traffic, lettered A, B, … by program.
pub fn marks(programs: &[Program]) -> Vec<Mark> {
    let mut out = Vec::new();
    for (i, p) in programs.iter().enumerate() {
        let letter = letter(i);
        let Some(rate) = p.flops_per_s() else {
            continue;
        };
        for &(level, _) in &p.traffic {
            if let Some(intensity) = p.intensity(level) {
                out.push(Mark {
                    letter,
                    intensity,
                    flops_per_s: rate,
                });
            }
        }
    }
    out
}

struct Canvas {
    cols: usize,
    rows: usize,
    /// Dots per cell across and down.
    dx: usize,
    dy: usize,
    dots: Vec<bool>,
    overlay: Vec<Option<char>>,
}

impl Canvas {
    fn new(cols: usize, rows: usize, ascii: bool) -> Canvas {
        let (dx, dy) = if ascii { (1, 1) } else { (2, 4) };
        Canvas {
            cols,
            rows,
            dx,
            dy,
            dots: vec![false; cols * dx * rows * dy],
            overlay: vec![None; cols * rows],
        }
    }

    fn width(&self) -> usize {
        self.cols * self.dx
    }

    fn height(&self) -> usize {
        self.rows * self.dy
    }

    fn set(&mut self, x: i64, y: i64) {
        if x >= 0 && y >= 0 && (x as usize) < self.width() && (y as usize) < self.height() {
            let w = self.width();
            self.dots[y as usize * w + x as usize] = true;
        }
    }

    fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
        // A roof whose end overflowed (a bandwidth near f64::MAX times an intensity) is left
        // out rather than drawn from infinity; the steps never exceed the canvas.
        if ![x0, y0, x1, y1].iter().all(|v| v.is_finite()) {
            return;
        }
        let most = 2 * (self.width() + self.height());
        let span = (x1 - x0).abs().max((y1 - y0).abs()).ceil();
        let steps = (span.min(most as f64) as usize).max(1) * 2;
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            self.set(
                (x0 + (x1 - x0) * t).round() as i64,
                (y0 + (y1 - y0) * t).round() as i64,
            );
        }
    }

    /// Puts a letter in the cell at (x, y); when another letter holds that cell, in the nearest
    /// free cell beside it on the same row (right first), so coinciding points stay visible.
    fn mark(&mut self, x: f64, y: f64, letter: char) {
        if !(x.is_finite() && y.is_finite()) {
            return;
        }
        let (col, row) = ((x / self.dx as f64) as i64, (y / self.dy as f64) as i64);
        if row < 0 || row as usize >= self.rows {
            return;
        }
        let row = row as usize;
        for offset in [0, 1, -1, 2, -2, 3, -3] {
            let c = col + offset;
            if c < 0 || c as usize >= self.cols {
                continue;
            }
            let slot = &mut self.overlay[row * self.cols + c as usize];
            match slot {
                Some(held) if *held == letter => return,
                Some(_) => continue,
                None => {
                    *slot = Some(letter);
                    return;
                }
            }
        }
    }

    fn cell(&self, col: usize, row: usize) -> char {
        if let Some(c) = self.overlay[row * self.cols + col] {
            return c;
        }
        let w = self.width();
        let dot = |x: usize, y: usize| self.dots[(row * self.dy + y) * w + col * self.dx + x];
        if self.dx == 1 {
            return if dot(0, 0) { '*' } else { ' ' };
        }
        // Braille: dots 1-2-3-7 down the left column, 4-5-6-8 down the right.
        const BITS: [[u32; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];
        let mut code = 0;
        for (x, column) in BITS.iter().enumerate() {
            for (y, bit) in column.iter().enumerate() {
                if dot(x, y) {
                    code |= bit;
                }
            }
        }
        if code == 0 {
            ' '
        } else {
            char::from_u32(0x2800 + code).unwrap_or('?')
        }
    }
}

/// A decade as a short label, at most six characters: 1e9 → "1G", 0.01 → "0.01", and past
/// the prefixes 1e17 or 1e-7.
fn decade_label(exp: i32) -> String {
    match exp {
        e if !(-4..=14).contains(&e) => format!("1e{e}"),
        e if e >= 12 => format!("{}T", 10f64.powi(e - 12)),
        e if e >= 9 => format!("{}G", 10f64.powi(e - 9)),
        e if e >= 6 => format!("{}M", 10f64.powi(e - 6)),
        e if e >= 3 => format!("{}k", 10f64.powi(e - 3)),
        e if e >= 0 => format!("{}", 10f64.powi(e)),
        e => format!("{}", 10f64.powi(e)),
    }
}

/// Whole decades enclosing values given by their logarithms (at least one decade wide);
/// infinite and NaN logarithms (values of zero or less, or not finite) are left out.
fn decades(logs: impl Iterator<Item = f64>) -> Option<(i32, i32)> {
    let logs: Vec<f64> = logs.filter(|l| l.is_finite()).collect();
    let lo = logs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    let (lo, hi) = (lo.floor() as i32, hi.ceil() as i32);
    Some((lo, hi.max(lo + 1)))
}

/// Draws the chart in `width` × `height` terminal cells (at least 30 × 8).
pub fn render(
    ceilings: &Ceilings,
    precision: Precision,
    marks: &[Mark],
    width: usize,
    height: usize,
    ascii: bool,
) -> String {
    let width = width.max(30);
    let height = height.max(8);
    // Only finite, positive figures can be placed on log axes; anything else is left off.
    let usable = |v: &f64| v.is_finite() && *v > 0.0;
    let peak = ceilings.peak(precision).filter(usable).unwrap_or(0.0);
    let levels: Vec<(Level, f64)> = [Level::L1, Level::L2, Level::L3, Level::Dram]
        .iter()
        .filter_map(|&l| ceilings.bandwidth(l).filter(usable).map(|bw| (l, bw)))
        .collect();
    let marks: Vec<&Mark> = marks
        .iter()
        .filter(|m| usable(&m.intensity) && usable(&m.flops_per_s))
        .collect();
    // Everything is placed by its logarithm, so that no product or quotient of extreme (but
    // finite) figures overflows: a ridge of 1e300 / 1e-300 is simply 600 decades.
    let log = |v: f64| {
        if v > 0.0 {
            v.log10()
        } else {
            f64::NEG_INFINITY
        }
    };
    let log_peak = log(peak);
    let ridges: Vec<f64> = levels.iter().map(|(_, bw)| log_peak - bw.log10()).collect();
    let Some((x_lo, x_hi)) = decades(
        ridges
            .iter()
            .copied()
            .chain(marks.iter().map(|m| m.intensity.log10()))
            .chain([-1.0, 1.0]),
    ) else {
        return "(no ceilings to draw)\n".to_string();
    };
    let slowest = levels
        .iter()
        .map(|(_, bw)| bw.log10() + x_lo as f64)
        .fold(f64::INFINITY, f64::min);
    let Some((y_lo, y_hi)) = decades(
        [log_peak, slowest]
            .into_iter()
            .chain(marks.iter().map(|m| m.flops_per_s.log10())),
    ) else {
        return "(no ceilings to draw)\n".to_string();
    };
    // Layout: y labels take 6 columns; the bottom two lines are the x axis and its labels.
    let label_w = 6;
    let cols = width - label_w - 1;
    let rows = height - 2;
    let mut canvas = Canvas::new(cols, rows, ascii);
    let (w, h) = (canvas.width() as f64, canvas.height() as f64);
    // Positions from logarithms.
    let to_x = |li: f64| (li - x_lo as f64) / (x_hi - x_lo) as f64 * (w - 1.0);
    let to_y = |lf: f64| (1.0 - (lf - y_lo as f64) / (y_hi - y_lo) as f64) * (h - 1.0);
    let (lx_min, lx_max) = (x_lo as f64, x_hi as f64);
    for (_, bw) in &levels {
        let lbw = bw.log10();
        let ridge = (log_peak - lbw).clamp(lx_min, lx_max);
        canvas.line(
            (to_x(lx_min), to_y(lbw + lx_min)),
            (to_x(ridge), to_y(lbw + ridge)),
        );
    }
    // Every precision's roof within the chart's height: those above it (int8 on a chart of
    // fp32 programs) are in the legend.
    for p in Precision::ALL {
        if let Some(peak) = ceilings.peak(p).filter(usable) {
            let lp = peak.log10();
            let start = levels
                .iter()
                .map(|(_, bw)| (lp - bw.log10()).clamp(lx_min, lx_max))
                .fold(lx_max, f64::min);
            canvas.line((to_x(start), to_y(lp)), (to_x(lx_max), to_y(lp)));
        }
    }
    for m in &marks {
        canvas.mark(
            to_x(m.intensity.log10()),
            to_y(m.flops_per_s.log10()),
            m.letter,
        );
    }
    let mut out = String::new();
    for row in 0..rows {
        // A decade label on the row nearest to its height.
        let mut label = String::new();
        for e in y_lo..=y_hi {
            let y = to_y(e as f64) / canvas.dy as f64;
            if y.round() as usize == row {
                label = decade_label(e);
            }
        }
        let axis = if ascii { '|' } else { '│' };
        out.push_str(&format!("{label:>label_w$}{axis}"));
        let line: String = (0..cols).map(|c| canvas.cell(c, row)).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let (corner, rule) = if ascii { ('+', '-') } else { ('└', '─') };
    out.push_str(&format!(
        "{:>label_w$}{corner}{}\n",
        "",
        rule.to_string().repeat(cols)
    ));
    let mut labels = vec![' '; cols + label_w + 1];
    // Where the last label ended: with many decades on few columns, a label that would touch
    // the one before is skipped.
    let mut free_from = 0;
    for e in x_lo..=x_hi {
        let text: Vec<char> = decade_label(e).chars().collect();
        let col = label_w + 1 + (to_x(e as f64) / canvas.dx as f64).round() as usize;
        let start = col
            .saturating_sub(text.len() / 2)
            .min(labels.len().saturating_sub(text.len()));
        if start < free_from || start + text.len() > labels.len() {
            continue;
        }
        labels[start..start + text.len()].copy_from_slice(&text);
        free_from = start + text.len() + 1;
    }
    out.push_str(labels.iter().collect::<String>().trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::roofline::PointSource;

    pub(crate) fn sample() -> (Ceilings, Vec<Program>) {
        let ceilings = crate::roofline::test_ceilings();
        let program = |label: &str, gflop: f64, s: f64, dram_gb: f64| Program {
            label: label.into(),
            precision: Precision::Fp32,
            flops: gflop * 1e9,
            seconds: s,
            traffic: vec![(Level::Dram, dram_gb * 1e9)],
            source: PointSource::Analytic,
            basis: Vec::new(),
        };
        (
            ceilings,
            vec![
                program("resnet", 8.0, 1.0, 0.5),
                program("mobilenet", 0.6, 0.1, 0.6),
            ],
        )
    }

    #[test]
    fn programs_are_lettered_by_position() {
        assert_eq!((letter(0), letter(25), letter(26)), ('A', 'Z', 'A'));
        // Two programs at the same intensity (one model at two thread counts) keep their own
        // letters.
        let (_, mut programs) = sample();
        programs[1] = programs[0].clone();
        programs[1].seconds *= 2.0;
        let m = marks(&programs);
        assert_eq!((m[0].letter, m[1].letter), ('A', 'B'));
        assert_eq!(m[0].intensity, m[1].intensity);
    }

    #[test]
    fn the_legend_lists_every_precision_top_to_bottom() {
        let mut c = crate::roofline::test_ceilings();
        c.compute.push(crate::roofline::ComputeRoof {
            precision: Precision::Int8,
            threads: 4,
            flops_per_s: 800e9,
            via: Some("AVX-512 VNNI".into()),
        });
        let (flat, _) = roofs(&c, Precision::Fp32);
        assert_eq!(
            flat,
            [
                (Precision::Int8, 800e9),
                (Precision::Fp32, 100e9),
                (Precision::Fp64, 50e9)
            ]
        );
    }

    #[test]
    fn decades_and_labels() {
        let logs = |v: &[f64]| v.iter().map(|x| x.log10()).collect::<Vec<_>>().into_iter();
        assert_eq!(decades(logs(&[0.5, 20.0])), Some((-1, 2)));
        assert_eq!(decades(logs(&[1.0])), Some((0, 1)));
        assert_eq!(decades(logs(&[0.0, f64::NAN, f64::INFINITY])), None);
        assert_eq!(decade_label(9), "1G");
        assert_eq!(decade_label(11), "100G");
        assert_eq!(decade_label(-2), "0.01");
    }

    #[test]
    fn chart_fits_its_size_and_marks_every_program() {
        let (c, programs) = sample();
        let m = marks(&programs);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].letter, m[0].intensity), ('A', 16.0));
        for ascii in [false, true] {
            for (w, h) in [(80, 24), (120, 40)] {
                let text = render(&c, Precision::Fp32, &m, w, h, ascii);
                assert_eq!(text.lines().count(), h, "{text}");
                assert!(text.lines().all(|l| l.chars().count() <= w), "{text}");
                assert!(text.contains('A') && text.contains('B'), "{text}");
                assert!(text.contains("100G") && text.contains("0.1"), "{text}");
                assert_eq!(
                    text.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c)),
                    !ascii
                );
            }
        }
    }

    #[test]
    fn coinciding_points_stay_visible_side_by_side() {
        let (c, programs) = sample();
        let mut twins = vec![
            programs[0].clone(),
            programs[0].clone(),
            programs[0].clone(),
        ];
        twins[1].label = "twin".into();
        twins[2].label = "triplet".into();
        let text = render(&c, Precision::Fp32, &marks(&twins), 80, 24, true);
        let row = text.lines().find(|l| l.contains('A')).unwrap_or_default();
        let col = row.find('A').unwrap_or(0);
        assert_eq!(row.get(col..col + 2), Some("AB"), "{text}");
        assert_eq!(row.get(col - 1..col), Some("C"), "{text}");
    }

    /// Any figures at all, finite or not, draw a chart of the asked size without a panic: the
    /// import checks keep nonsense out, but the chart must not depend on them.
    #[test]
    fn extreme_figures_draw_a_chart_of_the_asked_size() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let extremes = [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1e100,
            1e-100,
            1e300,
            1.0,
        ];
        let value = |rng: &mut rand_chacha::ChaCha8Rng| {
            if rng.random_bool(0.5) {
                extremes[rng.random_range(0..extremes.len())]
            } else {
                10f64.powf(rng.random_range(-300.0..300.0))
            }
        };
        let (base, _) = sample();
        for _ in 0..400 {
            let mut c = base.clone();
            for r in &mut c.compute {
                r.flops_per_s = value(&mut rng);
            }
            for r in &mut c.bandwidth {
                r.bytes_per_s = value(&mut rng);
            }
            let marks: Vec<Mark> = (0..rng.random_range(0..4))
                .map(|i| Mark {
                    letter: letter(i),
                    intensity: value(&mut rng),
                    flops_per_s: value(&mut rng),
                })
                .collect();
            let (w, h) = (rng.random_range(30..140), rng.random_range(8..50));
            let text = render(&c, Precision::Fp32, &marks, w, h, rng.random_bool(0.5));
            if text.starts_with("(no ceilings") {
                continue;
            }
            assert_eq!(text.lines().count(), h, "{text}");
            assert!(text.lines().all(|l| l.chars().count() <= w), "{text}");
        }
    }

    #[test]
    fn snapshots_braille_and_ascii_at_two_sizes() {
        let (c, programs) = sample();
        let m = marks(&programs);
        insta::assert_snapshot!(
            "braille_80x24",
            render(&c, Precision::Fp32, &m, 80, 24, false)
        );
        insta::assert_snapshot!("ascii_80x24", render(&c, Precision::Fp32, &m, 80, 24, true));
        insta::assert_snapshot!(
            "braille_120x40",
            render(&c, Precision::Fp32, &m, 120, 40, false)
        );
        insta::assert_snapshot!(
            "ascii_120x40",
            render(&c, Precision::Fp32, &m, 120, 40, true)
        );
    }
}
