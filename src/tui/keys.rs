//! Keybindings as data: one table maps keys to actions, and the footer and the help
//! screen are generated from it, so they can never disagree with what the keys do.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Everything a person can ask for. Keys map to actions; actions change app state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    Quit,
    Help,
    /// Close an overlay, or return from a frozen moment to live.
    Back,
    SelectPrev,
    SelectNext,
    /// Pause the selected worker for the pause length.
    PauseSelected,
    /// Pause worker N (0-based) for the pause length: number keys.
    PauseWorker(usize),
    /// Pause the selected worker until resumed, or resume it.
    HoldSelected,
    CrashSelected,
    ToggleFencing,
    Restart,
    Compare,
    ToggleInspector,
    SpeedDown,
    SpeedUp,
    TtlDown,
    TtlUp,
    PauseLengthDown,
    PauseLengthUp,
    AddWorker,
    RemoveWorker,
    /// Simulator only: stop or start virtual time.
    SimPlayPause,
    /// Simulator only: let virtual time move 100 ms (a replay: to the next event).
    SimStep,
    /// Replays only: back to the previous event.
    StepBack,
    MomentBack,
    MomentForward,
    ZoomIn,
    ZoomOut,
    NextViolation,
    CycleTheme,
    /// Lessons: go on past a step that waits, or a question once answered.
    Continue,
    /// Lessons: scroll the narration up (back in its history) / down.
    NarrationUp,
    NarrationDown,
    /// Lessons: read the step before / after the one at the bottom of the narration.
    NarrationBack,
    NarrationForward,
    /// Lessons: take the lesson again from its first run, with fresh questions.
    Retake,
    /// The next lock service: one Redis, Redlock, etcd.
    NextLock,
    /// The next storage: a Redis list, a PostgreSQL table.
    NextStorage,
}

/// One row of the table.
pub struct Binding {
    /// How the key is written in the footer and the help.
    pub label: &'static str,
    pub codes: &'static [KeyCode],
    pub action: Action,
    pub help: &'static str,
    /// Shown in the one-line footer (the most used keys only).
    pub footer: Option<&'static str>,
}

pub const BINDINGS: &[Binding] = &[
    b("q", &[KeyCode::Char('q')], Action::Quit, "quit (also Ctrl-C)", Some("quit")),
    b("?", &[KeyCode::Char('?')], Action::Help, "this help", Some("help")),
    b(
        "Enter",
        &[KeyCode::Enter],
        Action::Continue,
        "lessons: continue (answer questions with 1-9)",
        None,
    ),
    b(
        "PgUp/Dn",
        &[KeyCode::PageUp, KeyCode::PageDown],
        Action::NarrationUp,
        "lessons: scroll the narration",
        None,
    ),
    b(
        "< >",
        &[KeyCode::Char('<'), KeyCode::Char('>')],
        Action::NarrationBack,
        "lessons: read the step before / after",
        None,
    ),
    b(
        "R",
        &[KeyCode::Char('R')],
        Action::Retake,
        "lessons: take the lesson again, with fresh questions",
        None,
    ),
    b(
        "↑ ↓",
        &[KeyCode::Up, KeyCode::Down],
        Action::SelectPrev,
        "select a worker's lane (or click it)",
        None,
    ),
    b(
        "1-9",
        &[],
        Action::PauseWorker(0),
        "pause worker 1-9 for the pause length",
        Some("pause A/B/.."),
    ),
    b(
        "p",
        &[KeyCode::Char('p')],
        Action::PauseSelected,
        "pause the selected worker for the pause length",
        None,
    ),
    b(
        "space",
        &[KeyCode::Char(' ')],
        Action::HoldSelected,
        "pause the selected worker until resumed / resume it",
        Some("hold/resume"),
    ),
    b(
        "x",
        &[KeyCode::Char('x')],
        Action::CrashSelected,
        "crash the selected worker (it never releases)",
        Some("crash"),
    ),
    b(
        "f",
        &[KeyCode::Char('f')],
        Action::ToggleFencing,
        "fencing tokens on/off (now, and for reruns)",
        Some("fencing"),
    ),
    b(
        "r",
        &[KeyCode::Char('r')],
        Action::Restart,
        "restart the scenario (with any changed settings)",
        Some("restart"),
    ),
    b(
        "c",
        &[KeyCode::Char('c')],
        Action::Compare,
        "rerun: a lesson's next variant, or fencing flipped; one run above the other",
        Some("compare"),
    ),
    b(
        "i",
        &[KeyCode::Char('i')],
        Action::ToggleInspector,
        "show the Redis commands each worker sent",
        Some("commands"),
    ),
    b(
        "[ ]",
        &[KeyCode::Char('['), KeyCode::Char(']')],
        Action::SpeedDown,
        "slower / faster (scales every lease and pause)",
        None,
    ),
    b(
        "t T",
        &[KeyCode::Char('t'), KeyCode::Char('T')],
        Action::TtlDown,
        "lease (TTL) shorter / longer, for the next run",
        None,
    ),
    b(
        "- +",
        &[KeyCode::Char('-'), KeyCode::Char('+')],
        Action::PauseLengthDown,
        "pause length shorter / longer",
        None,
    ),
    b(
        "a d",
        &[KeyCode::Char('a'), KeyCode::Char('d')],
        Action::AddWorker,
        "add / remove a worker, for the next run",
        None,
    ),
    b(
        "l w",
        &[KeyCode::Char('l'), KeyCode::Char('w')],
        Action::NextLock,
        "next lock service (Redis, Redlock, etcd) / storage (Redis, PostgreSQL)",
        None,
    ),
    b("s", &[KeyCode::Char('s')], Action::SimPlayPause, "simulator: stop / start time", None),
    b(
        ".",
        &[KeyCode::Char('.')],
        Action::SimStep,
        "simulator: step time by 100 ms (while stopped); replay: to the next event",
        None,
    ),
    b(",", &[KeyCode::Char(',')], Action::StepBack, "replay: back to the previous event", None),
    b(
        "← →",
        &[KeyCode::Left, KeyCode::Right],
        Action::MomentBack,
        "freeze and move through time; inspect who held what",
        None,
    ),
    b(
        "z Z",
        &[KeyCode::Char('z'), KeyCode::Char('Z')],
        Action::ZoomIn,
        "zoom the timeline in / out",
        None,
    ),
    b("n", &[KeyCode::Char('n')], Action::NextViolation, "jump to the next safety violation", None),
    b(
        "m",
        &[KeyCode::Char('m')],
        Action::CycleTheme,
        "switch between the normal and the presenter theme",
        None,
    ),
    b("Esc", &[KeyCode::Esc], Action::Back, "close this help / back to live", None),
];

const fn b(
    label: &'static str,
    codes: &'static [KeyCode],
    action: Action,
    help: &'static str,
    footer: Option<&'static str>,
) -> Binding {
    Binding { label, codes, action, help, footer }
}

/// The action for a key press, if any. Pairs in the table ("[ ]", "t T", ...) map
/// their second key to the opposite action.
pub fn action_for(key: KeyEvent) -> Option<Action> {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    if let KeyCode::Char(c @ '1'..='9') = key.code {
        return Some(Action::PauseWorker(c as usize - '1' as usize));
    }
    for binding in BINDINGS {
        if let Some(pos) = binding.codes.iter().position(|c| *c == key.code) {
            return Some(if pos == 0 { binding.action } else { second_of(binding.action) });
        }
    }
    None
}

/// The other half of a paired binding.
fn second_of(action: Action) -> Action {
    match action {
        Action::SelectPrev => Action::SelectNext,
        Action::SpeedDown => Action::SpeedUp,
        Action::TtlDown => Action::TtlUp,
        Action::PauseLengthDown => Action::PauseLengthUp,
        Action::AddWorker => Action::RemoveWorker,
        Action::NextLock => Action::NextStorage,
        Action::MomentBack => Action::MomentForward,
        Action::ZoomIn => Action::ZoomOut,
        Action::NarrationUp => Action::NarrationDown,
        Action::NarrationBack => Action::NarrationForward,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> Option<Action> {
        action_for(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn pairs_map_to_opposite_actions() {
        assert_eq!(press(KeyCode::Up), Some(Action::SelectPrev));
        assert_eq!(press(KeyCode::Down), Some(Action::SelectNext));
        assert_eq!(press(KeyCode::Char('l')), Some(Action::NextLock));
        assert_eq!(press(KeyCode::Char('w')), Some(Action::NextStorage));
        assert_eq!(press(KeyCode::Char(']')), Some(Action::SpeedUp));
        assert_eq!(press(KeyCode::Char('T')), Some(Action::TtlUp));
        assert_eq!(press(KeyCode::PageDown), Some(Action::NarrationDown));
        assert_eq!(press(KeyCode::Char('<')), Some(Action::NarrationBack));
        assert_eq!(press(KeyCode::Char('>')), Some(Action::NarrationForward));
        assert_eq!(press(KeyCode::Char('R')), Some(Action::Retake));
        assert_eq!(press(KeyCode::Char('r')), Some(Action::Restart));
    }

    #[test]
    fn number_keys_pause_workers_and_ctrl_c_quits() {
        assert_eq!(press(KeyCode::Char('1')), Some(Action::PauseWorker(0)));
        assert_eq!(press(KeyCode::Char('3')), Some(Action::PauseWorker(2)));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for(ctrl_c), Some(Action::Quit));
        assert_eq!(press(KeyCode::Char('c')), Some(Action::Compare));
    }

    #[test]
    fn no_key_is_bound_twice() {
        let mut seen = Vec::new();
        for code in BINDINGS.iter().flat_map(|b| b.codes) {
            assert!(!seen.contains(code), "{code:?} is bound twice");
            seen.push(*code);
        }
    }
}
