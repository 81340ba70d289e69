//! Time to pixels, one column per pixel of the plot: whatever a log holds, a lane is
//! drawn from its columns, so the picture's size and the work to draw it are bounded by
//! the picture's width, not by the number of events or the time they span.

/// The plot's horizontal axis: `columns` pixels from `left`, scenario time 0 to `end_ms`.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub left: f64,
    pub columns: usize,
    pub end_ms: f64,
}

impl Scale {
    pub fn x(&self, t_ms: f64) -> f64 {
        self.left + (t_ms / self.end_ms).clamp(0.0, 1.0) * self.columns as f64
    }

    /// The column that moment `t_ms` falls in.
    pub fn column(&self, t_ms: f64) -> usize {
        let c = (t_ms / self.end_ms * self.columns as f64).floor();
        if c.is_nan() || c < 0.0 { 0 } else { (c as usize).min(self.columns - 1) }
    }

    /// The columns the stretch [from, to) touches; a stretch of no length still has
    /// its column, so a hold of a millisecond is drawn.
    pub fn span(&self, from_ms: f64, to_ms: f64) -> (usize, usize) {
        let first = self.column(from_ms);
        let after = (to_ms / self.end_ms * self.columns as f64).ceil();
        let last = if after.is_nan() || after < 1.0 {
            0
        } else {
            (after as usize - 1).min(self.columns - 1)
        };
        (first, last.max(first))
    }

    pub fn column_x(&self, c: usize) -> f64 {
        self.left + c as f64
    }
}

/// Per column, the most important thing that happened in it (a higher value wins:
/// danger over holding over waiting), so nothing short disappears between pixels.
#[derive(Debug, Clone)]
pub struct Columns<T> {
    cells: Vec<Option<T>>,
}

impl<T: Copy + Ord> Columns<T> {
    pub fn new(scale: &Scale) -> Self {
        Columns { cells: vec![None; scale.columns] }
    }

    /// `value` over the columns `first..=last`, where it outranks what is there.
    pub fn paint(&mut self, (first, last): (usize, usize), value: T) {
        for cell in &mut self.cells[first..=last] {
            if cell.is_none_or(|old| value > old) {
                *cell = Some(value);
            }
        }
    }

    /// Runs of equal columns as (first column, length, value).
    pub fn runs(&self) -> Vec<(usize, usize, T)> {
        let mut runs: Vec<(usize, usize, T)> = Vec::new();
        for (c, cell) in self.cells.iter().enumerate() {
            let Some(v) = *cell else { continue };
            match runs.last_mut() {
                Some((first, len, last)) if *last == v && *first + *len == c => *len += 1,
                _ => runs.push((c, 1, v)),
            }
        }
        runs
    }
}

/// A tick step of 1, 2 or 5 times a power of ten ms that leaves at least `min_px`
/// between ticks.
pub fn tick_step(scale: &Scale, min_px: f64) -> f64 {
    let px_per_ms = scale.columns as f64 / scale.end_ms;
    let mut step = 1.0;
    // A span beyond f64's range leaves no pixels per ms: one tick at the end then.
    while step < f64::MAX / 10.0 {
        for m in [1.0, 2.0, 5.0] {
            if step * m * px_per_ms >= min_px {
                return step * m;
            }
        }
        step *= 10.0;
    }
    scale.end_ms
}

/// A tick's label: seconds, or ms below a second, without needless decimals.
pub fn tick_label(t_ms: f64) -> String {
    // Multiples of a 0.1 or 0.2 step carry float noise (0.6000000000000001).
    let tidy = |v: f64| (v * 1000.0).round() / 1000.0;
    if t_ms == 0.0 {
        "0 s".to_string()
    } else if t_ms < 1000.0 {
        format!("{} ms", tidy(t_ms))
    } else if t_ms < 1e9 {
        format!("{} s", tidy(t_ms / 1000.0))
    } else {
        // Three significant digits at most: 1.2e12, not 1e12 twice.
        let s = t_ms / 1000.0;
        let digits = 10f64.powi(s.log10().floor() as i32 - 2);
        format!("{:e} s", (s / digits).round() * digits)
    }
}
