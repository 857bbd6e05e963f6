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
        let steps = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1) * 2;
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

/// A decade as a short label: 1e9 → "1G", 0.01 → "0.01".
fn decade_label(exp: i32) -> String {
    match exp {
        e if e >= 12 => format!("{}T", 10f64.powi(e - 12)),
        e if e >= 9 => format!("{}G", 10f64.powi(e - 9)),
        e if e >= 6 => format!("{}M", 10f64.powi(e - 6)),
        e if e >= 3 => format!("{}k", 10f64.powi(e - 3)),
        e if e >= 0 => format!("{}", 10f64.powi(e)),
        e => format!("{}", 10f64.powi(e)),
    }
}

/// Whole decades enclosing the values (at least one decade wide).
fn decades(values: impl Iterator<Item = f64>) -> Option<(i32, i32)> {
    let logs: Vec<f64> = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(f64::log10)
        .collect();
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
    let peak = ceilings.peak(precision).unwrap_or(0.0);
    let levels: Vec<(Level, f64)> = [Level::L1, Level::L2, Level::L3, Level::Dram]
        .iter()
        .filter_map(|&l| ceilings.bandwidth(l).map(|bw| (l, bw)))
        .collect();
    let ridges: Vec<f64> = levels.iter().map(|(_, bw)| peak / bw).collect();
    let Some((x_lo, x_hi)) = decades(
        ridges
            .iter()
            .copied()
            .chain(marks.iter().map(|m| m.intensity))
            .chain([0.1, 10.0]),
    ) else {
        return "(no ceilings to draw)\n".to_string();
    };
    let slowest = levels
        .iter()
        .map(|(_, bw)| bw * 10f64.powi(x_lo))
        .fold(f64::INFINITY, f64::min);
    let Some((y_lo, y_hi)) = decades(
        [peak, slowest]
            .into_iter()
            .chain(marks.iter().map(|m| m.flops_per_s)),
    ) else {
        return "(no ceilings to draw)\n".to_string();
    };
    // Layout: y labels take 6 columns; the bottom two lines are the x axis and its labels.
    let label_w = 6;
    let cols = width - label_w - 1;
    let rows = height - 2;
    let mut canvas = Canvas::new(cols, rows, ascii);
    let (w, h) = (canvas.width() as f64, canvas.height() as f64);
    let to_x = |i: f64| (i.log10() - x_lo as f64) / (x_hi - x_lo) as f64 * (w - 1.0);
    let to_y = |f: f64| (1.0 - (f.log10() - y_lo as f64) / (y_hi - y_lo) as f64) * (h - 1.0);
    let x_min = 10f64.powi(x_lo);
    let x_max = 10f64.powi(x_hi);
    for (_, bw) in &levels {
        let ridge = (peak / bw).clamp(x_min, x_max);
        canvas.line(
            (to_x(x_min), to_y(bw * x_min)),
            (to_x(ridge), to_y(bw * ridge)),
        );
    }
    for p in [Precision::Fp64, Precision::Fp32, Precision::Fp16] {
        if let Some(peak) = ceilings.peak(p) {
            let start = levels
                .iter()
                .map(|(_, bw)| (peak / bw).clamp(x_min, x_max))
                .fold(x_max, f64::min);
            canvas.line((to_x(start), to_y(peak)), (to_x(x_max), to_y(peak)));
        }
    }
    for m in marks {
        canvas.mark(to_x(m.intensity), to_y(m.flops_per_s), m.letter);
    }
    let mut out = String::new();
    for row in 0..rows {
        // A decade label on the row nearest to its height.
        let mut label = String::new();
        for e in y_lo..=y_hi {
            let y = to_y(10f64.powi(e)) / canvas.dy as f64;
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
    for e in x_lo..=x_hi {
        let text = decade_label(e);
        let col = label_w + 1 + (to_x(10f64.powi(e)) / canvas.dx as f64).round() as usize;
        let start = col
            .saturating_sub(text.len() / 2)
            .min(labels.len().saturating_sub(text.len()));
        for (i, ch) in text.chars().enumerate() {
            labels[start + i] = ch;
        }
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
    fn decades_and_labels() {
        assert_eq!(decades([0.5, 20.0].into_iter()), Some((-1, 2)));
        assert_eq!(decades([1.0].into_iter()), Some((0, 1)));
        assert_eq!(decades([0.0, f64::NAN].into_iter()), None);
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
