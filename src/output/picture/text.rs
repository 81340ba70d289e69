//! Text on the picture without a font engine: widths estimated from DejaVu Sans'
//! advances (what `rsvg-convert` and browsers on Linux use for the picture's font
//! list), middle elision to a width, and a placer that refuses a label where it would
//! overlap one already placed. Every text of the picture goes through the placer, so
//! the boxes it keeps are the picture's own layout data, which tests check.

/// One piece of text as laid out: left edge, baseline, size in px.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub x: f64,
    pub baseline: f64,
    pub size: f64,
    pub bold: bool,
    pub text: String,
}

impl TextBox {
    pub fn width(&self) -> f64 {
        width(&self.text, self.size, self.bold)
    }

    /// Top and bottom of the box: ascent above the baseline, descent below.
    pub fn top(&self) -> f64 {
        self.baseline - 0.8 * self.size
    }

    pub fn bottom(&self) -> f64 {
        self.baseline + 0.25 * self.size
    }

    pub fn right(&self) -> f64 {
        self.x + self.width()
    }

    /// Whether the two boxes share any area (touching edges do not count).
    pub fn overlaps(&self, other: &TextBox) -> bool {
        self.x < other.right()
            && other.x < self.right()
            && self.top() < other.bottom()
            && other.top() < self.bottom()
    }
}

/// Advance of one character in em, after DejaVu Sans (a little generous, so an
/// estimate never comes out narrower than the drawing).
fn advance(c: char) -> f64 {
    match c {
        ' ' | 'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '|' | '!' | '\'' => 0.33,
        'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' | '/' => 0.42,
        'm' | 'w' | 'M' | 'W' | '@' | '%' => 0.95,
        'A'..='Z' => 0.74,
        '0'..='9' => 0.64,
        c if c.is_ascii() => 0.62,
        // ✔ ✘ ✖ · → ‖ and letters of other scripts.
        _ => 0.85,
    }
}

/// Estimated width in px of `text` at `size` px.
pub fn width(text: &str, size: f64, bold: bool) -> f64 {
    let em: f64 = text.chars().map(advance).sum();
    em * size * if bold { 1.1 } else { 1.0 }
}

/// `text` shortened in the middle with "…" until it fits `max` px (a socket path
/// keeps its start and its file name). Linear in the text's length: the widths of
/// its heads and tails come from one running sum, not from measuring each try
/// (a 100,000-character worker name in a saved log is one try per character).
pub fn elide_middle(text: &str, size: f64, bold: bool, max: f64) -> String {
    if width(text, size, bold) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    // prefix[i]: the advance of the first i characters, in em.
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for &c in &chars {
        prefix.push(prefix[prefix.len() - 1] + advance(c));
    }
    let px = size * if bold { 1.1 } else { 1.0 };
    for keep in (0..n).rev() {
        let (head, tail) = (keep.div_ceil(2), keep / 2);
        let em = prefix[head] + advance('…') + (prefix[n] - prefix[n - tail]);
        if em * px <= max {
            return chars[..head].iter().chain(['…'].iter()).chain(&chars[n - tail..]).collect();
        }
    }
    "…".to_string()
}

/// The space kept free before and after a label, in px.
const GAP: f64 = 6.0;

/// The texts placed so far, in a canvas `width` px wide.
#[derive(Debug, Default)]
pub struct Placer {
    pub width: f64,
    pub placed: Vec<TextBox>,
}

impl Placer {
    pub fn new(width: f64) -> Self {
        Placer { width, placed: Vec::new() }
    }

    /// Place `text` unless it would overlap a text already placed or leave the canvas;
    /// pulled left to fit the right edge first. Returns the box placed.
    pub fn try_place(&mut self, mut candidate: TextBox) -> Option<TextBox> {
        let overflow = candidate.right() - (self.width - 4.0);
        if overflow > 0.0 {
            candidate.x -= overflow;
        }
        // A little air between neighbours on one row, so "token 1" and "token 2"
        // never read as one label.
        let padded = TextBox {
            x: candidate.x - GAP,
            text: candidate.text.clone() + "  ",
            ..candidate.clone()
        };
        if candidate.x < 0.0 || self.placed.iter().any(|p| p.overlaps(&padded)) {
            return None;
        }
        self.placed.push(candidate.clone());
        Some(candidate)
    }
}
