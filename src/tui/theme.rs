//! Styles. One value per theme; a presenter theme is just another value.
//!
//! Colours come from the Okabe-Ito palette, which stays distinguishable for the
//! common forms of colour blindness. Colour never carries meaning alone: every state
//! also has its own glyph (see the legend in the help screen). With `NO_COLOR` set,
//! the colourless theme keeps only bold, reverse and the glyphs.

use ratatui::style::{Color, Modifier, Style};

/// Okabe-Ito colours.
const BLUE: Color = Color::Rgb(0, 114, 178);
const SKY: Color = Color::Rgb(86, 180, 233);
const GREEN: Color = Color::Rgb(0, 158, 115);
const ORANGE: Color = Color::Rgb(230, 159, 0);
const VERMILLION: Color = Color::Rgb(213, 94, 0);
const PURPLE: Color = Color::Rgb(204, 121, 167);
const YELLOW: Color = Color::Rgb(240, 228, 66);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThemeName {
    Default,
    Presenter,
    NoColor,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Theme {
    pub name: ThemeName,
    pub base: Style,
    pub dim: Style,
    pub title: Style,
    pub border: Style,
    pub selected: Style,
    pub fencing_on: Style,
    pub fencing_off: Style,
    pub backend: Style,
    pub simulator: Style,
    /// A worker that believes it holds the lock, and Redis agrees.
    pub holding: Style,
    pub waiting: Style,
    pub paused: Style,
    /// Believes it holds the lock, but Redis says someone else (or nobody) does.
    pub danger: Style,
    pub accepted: Style,
    pub rejected: Style,
    pub error: Style,
    pub key: Style,
    /// Truth-lane colours, one per worker (cycled).
    pub workers: [Style; 5],
}

impl Theme {
    pub const DEFAULT: Theme = Theme {
        name: ThemeName::Default,
        base: Style::new(),
        dim: Style::new().fg(Color::DarkGray),
        title: Style::new().add_modifier(Modifier::BOLD),
        border: Style::new().fg(Color::Gray),
        selected: Style::new().add_modifier(Modifier::REVERSED),
        fencing_on: Style::new().fg(Color::Black).bg(GREEN).add_modifier(Modifier::BOLD),
        fencing_off: Style::new().fg(Color::Black).bg(ORANGE).add_modifier(Modifier::BOLD),
        backend: Style::new().fg(SKY),
        simulator: Style::new().fg(Color::Black).bg(YELLOW).add_modifier(Modifier::BOLD),
        holding: Style::new().fg(BLUE),
        waiting: Style::new().fg(Color::DarkGray),
        paused: Style::new().fg(ORANGE),
        danger: Style::new().fg(VERMILLION).add_modifier(Modifier::BOLD),
        accepted: Style::new().fg(GREEN),
        rejected: Style::new().fg(VERMILLION),
        error: Style::new().fg(VERMILLION).add_modifier(Modifier::BOLD),
        key: Style::new().fg(SKY).add_modifier(Modifier::BOLD),
        workers: [
            Style::new().fg(BLUE),
            Style::new().fg(PURPLE),
            Style::new().fg(GREEN),
            Style::new().fg(SKY),
            Style::new().fg(YELLOW),
        ],
    };

    /// For projectors: everything bold, white on black, no greys that wash out.
    pub const PRESENTER: Theme = Theme {
        name: ThemeName::Presenter,
        base: Style::new().fg(Color::White).bg(Color::Black).add_modifier(Modifier::BOLD),
        dim: Style::new().fg(Color::White),
        title: Style::new().fg(Color::White).add_modifier(Modifier::BOLD),
        border: Style::new().fg(Color::White),
        waiting: Style::new().fg(Color::White),
        holding: Style::new().fg(SKY).add_modifier(Modifier::BOLD),
        workers: [
            Style::new().fg(SKY).add_modifier(Modifier::BOLD),
            Style::new().fg(PURPLE).add_modifier(Modifier::BOLD),
            Style::new().fg(GREEN).add_modifier(Modifier::BOLD),
            Style::new().fg(YELLOW).add_modifier(Modifier::BOLD),
            Style::new().fg(Color::White).add_modifier(Modifier::BOLD),
        ],
        ..Theme::DEFAULT
    };

    /// `NO_COLOR`: meaning by glyphs, bold and reverse video only.
    pub const NO_COLOR: Theme = Theme {
        name: ThemeName::NoColor,
        base: Style::new(),
        dim: Style::new(),
        title: Style::new().add_modifier(Modifier::BOLD),
        border: Style::new(),
        selected: Style::new().add_modifier(Modifier::REVERSED),
        fencing_on: Style::new().add_modifier(Modifier::REVERSED.union(Modifier::BOLD)),
        fencing_off: Style::new().add_modifier(Modifier::REVERSED.union(Modifier::BOLD)),
        backend: Style::new(),
        simulator: Style::new().add_modifier(Modifier::REVERSED),
        holding: Style::new(),
        waiting: Style::new(),
        paused: Style::new(),
        danger: Style::new().add_modifier(Modifier::BOLD),
        accepted: Style::new(),
        rejected: Style::new().add_modifier(Modifier::BOLD),
        error: Style::new().add_modifier(Modifier::BOLD),
        key: Style::new().add_modifier(Modifier::BOLD),
        workers: [Style::new(); 5],
    };

    /// The theme to start with: colourless when `NO_COLOR` is set (any value).
    pub fn initial(presenter: bool) -> Theme {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            Theme::NO_COLOR
        } else if presenter {
            Theme::PRESENTER
        } else {
            Theme::DEFAULT
        }
    }

    /// The next theme for the theme key (NO_COLOR stays colourless).
    pub fn next(&self) -> Theme {
        match self.name {
            ThemeName::Default => Theme::PRESENTER,
            ThemeName::Presenter => Theme::DEFAULT,
            ThemeName::NoColor => Theme::NO_COLOR,
        }
    }

    pub fn worker(&self, index: usize) -> Style {
        self.workers[index % self.workers.len()]
    }
}
