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
    /// When a run has ended: search its scenario for a schedule that breaks it, and
    /// run that as a compare.
    Break,
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
    /// Lessons: take the lesson again from its first run, the choices reordered.
    Retake,
    /// Leave for the course's menu (`fencelab lesson` with no name).
    LessonMenu,
    /// The next lock service: one Redis, Redlock, etcd.
    NextLock,
    /// The next storage: a Redis list, a PostgreSQL table.
    NextStorage,
    /// How waiters wake, for the next run: by the lease, polling, or told.
    NextWait,
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
    /// What the key does in a replay of a saved run.
    pub replay: InReplay,
}

/// A key in a replay: the same as live (a view key), something of the replay's own
/// (moving its cursor), or nothing, because it would change a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InReplay {
    Same,
    Does(&'static str),
    Cannot,
}

pub const BINDINGS: &[Binding] = &[
    b("q", &[KeyCode::Char('q')], Action::Quit, "quit (also Ctrl-C)", Some("quit"), InReplay::Same),
    b("?", &[KeyCode::Char('?')], Action::Help, "this help", Some("help"), InReplay::Same),
    b(
        "Enter",
        &[KeyCode::Enter],
        Action::Continue,
        "lessons: continue (answer questions with 1-9)",
        None,
        InReplay::Cannot,
    ),
    b(
        "PgUp/Dn",
        &[KeyCode::PageUp, KeyCode::PageDown],
        Action::NarrationUp,
        "lessons: scroll the narration; elsewhere: a page of lanes",
        None,
        InReplay::Same,
    ),
    b(
        "< >",
        &[KeyCode::Char('<'), KeyCode::Char('>')],
        Action::NarrationBack,
        "lessons: read the step before / after",
        None,
        InReplay::Same,
    ),
    b(
        "R",
        &[KeyCode::Char('R')],
        Action::Retake,
        "lessons: take the lesson again, each question's choices in a new order",
        None,
        InReplay::Cannot,
    ),
    b(
        "L",
        &[KeyCode::Char('L')],
        Action::LessonMenu,
        "the course's lessons: a menu, its cursor where you stopped",
        None,
        InReplay::Cannot,
    ),
    b(
        "↑ ↓",
        &[KeyCode::Up, KeyCode::Down],
        Action::SelectPrev,
        "select a worker's lane (or click it)",
        None,
        InReplay::Same,
    ),
    b(
        "1-9",
        &[],
        Action::PauseWorker(0),
        "pause worker 1-9 for the pause length",
        Some("pause A/B/.."),
        InReplay::Cannot,
    ),
    b(
        "p",
        &[KeyCode::Char('p')],
        Action::PauseSelected,
        "pause the selected worker for the pause length",
        None,
        InReplay::Cannot,
    ),
    b(
        "space",
        &[KeyCode::Char(' ')],
        Action::HoldSelected,
        "pause the selected worker until resumed / resume it",
        Some("hold/resume"),
        InReplay::Does("play/pause"),
    ),
    b(
        "x",
        &[KeyCode::Char('x')],
        Action::CrashSelected,
        "crash the selected worker (it never releases)",
        Some("crash"),
        InReplay::Cannot,
    ),
    b(
        "f",
        &[KeyCode::Char('f')],
        Action::ToggleFencing,
        "fencing tokens on/off (now, and for reruns)",
        Some("fencing"),
        InReplay::Cannot,
    ),
    b(
        "r",
        &[KeyCode::Char('r')],
        Action::Restart,
        "restart the scenario (with any changed settings)",
        Some("restart"),
        InReplay::Does("from the start"),
    ),
    b(
        "c",
        &[KeyCode::Char('c')],
        Action::Compare,
        "rerun: a lesson's next variant, or fencing flipped; one run above the other",
        Some("compare"),
        InReplay::Cannot,
    ),
    b(
        "b",
        &[KeyCode::Char('b')],
        Action::Break,
        "when a run has ended: search for the faults that break it, then run them below",
        None,
        InReplay::Cannot,
    ),
    b(
        "i",
        &[KeyCode::Char('i')],
        Action::ToggleInspector,
        "show the commands each worker sent, with replies and latency",
        Some("commands"),
        InReplay::Same,
    ),
    b(
        "[ ]",
        &[KeyCode::Char('['), KeyCode::Char(']')],
        Action::SpeedDown,
        "slower / faster (scales every lease and pause)",
        None,
        InReplay::Does("speed"),
    ),
    b(
        "t T",
        &[KeyCode::Char('t'), KeyCode::Char('T')],
        Action::TtlDown,
        "lease (TTL) shorter / longer, for the next run",
        None,
        InReplay::Cannot,
    ),
    b(
        "- +",
        &[KeyCode::Char('-'), KeyCode::Char('+')],
        Action::PauseLengthDown,
        "pause length shorter / longer",
        None,
        InReplay::Cannot,
    ),
    b(
        "a d",
        &[KeyCode::Char('a'), KeyCode::Char('d')],
        Action::AddWorker,
        "add / remove a worker, for the next run",
        None,
        InReplay::Cannot,
    ),
    b(
        "l w",
        &[KeyCode::Char('l'), KeyCode::Char('w')],
        Action::NextLock,
        "next lock service (Redis, Redlock, etcd) / storage (Redis, PostgreSQL)",
        None,
        InReplay::Cannot,
    ),
    b(
        "v",
        &[KeyCode::Char('v')],
        Action::NextWait,
        "how waiters wake (lease's end, poll every 100 ms, notify), for the next run",
        None,
        InReplay::Cannot,
    ),
    b(
        "s",
        &[KeyCode::Char('s')],
        Action::SimPlayPause,
        "simulator: stop / start time",
        None,
        InReplay::Does("play/pause"),
    ),
    b(
        ".",
        &[KeyCode::Char('.')],
        Action::SimStep,
        "simulator: step time by 100 ms (while stopped); replay: to the next event",
        None,
        InReplay::Does("next event"),
    ),
    b(
        ",",
        &[KeyCode::Char(',')],
        Action::StepBack,
        "replay: back to the previous event",
        None,
        InReplay::Does("previous event"),
    ),
    b(
        "← →",
        &[KeyCode::Left, KeyCode::Right],
        Action::MomentBack,
        "freeze and move through time; inspect who held what",
        None,
        InReplay::Does("scrub"),
    ),
    b(
        "z Z",
        &[KeyCode::Char('z'), KeyCode::Char('Z')],
        Action::ZoomIn,
        "zoom the timeline in / out",
        None,
        InReplay::Same,
    ),
    b(
        "n",
        &[KeyCode::Char('n')],
        Action::NextViolation,
        "jump to the next safety violation",
        None,
        InReplay::Does("next violation"),
    ),
    b(
        "m",
        &[KeyCode::Char('m')],
        Action::CycleTheme,
        "switch between the normal and the presenter theme",
        None,
        InReplay::Same,
    ),
    b("Esc", &[KeyCode::Esc], Action::Back, "close this help / back to live", None, InReplay::Same),
];

const fn b(
    label: &'static str,
    codes: &'static [KeyCode],
    action: Action,
    help: &'static str,
    footer: Option<&'static str>,
    replay: InReplay,
) -> Binding {
    Binding { label, codes, action, help, footer, replay }
}

/// The table's row for an action (a pair's second action finds the pair's row).
pub fn binding(action: Action) -> Option<&'static Binding> {
    let first = match action {
        Action::PauseWorker(_) => Action::PauseWorker(0),
        other => first_of(other),
    };
    BINDINGS.iter().find(|b| b.action == first)
}

/// The key works in a replay as it does live.
pub fn works_in_replay(action: Action) -> bool {
    binding(action).is_some_and(|b| b.replay == InReplay::Same)
}

/// How the help names an action: its key and what it does.
pub fn describe(action: Action) -> String {
    binding(action).map_or_else(String::new, |b| format!("{}: {}", b.label, b.help))
}

/// The replay's own keys and what each does, in table order (a key whose meaning an
/// earlier one already has, like `s` after `space`, is left out).
pub fn replay_bindings() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for b in BINDINGS {
        if let InReplay::Does(what) = b.replay
            && out.iter().all(|(_, w)| *w != what)
        {
            out.push((b.label, what));
        }
    }
    out
}

/// The replay's own keys, as one line: "space play/pause · r from the start · ...".
pub fn replay_keys() -> String {
    let parts: Vec<String> =
        replay_bindings().iter().map(|(key, what)| format!("{key} {what}")).collect();
    parts.join(" · ")
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

/// The first half of a paired binding.
fn first_of(action: Action) -> Action {
    match action {
        Action::SelectNext => Action::SelectPrev,
        Action::SpeedUp => Action::SpeedDown,
        Action::TtlUp => Action::TtlDown,
        Action::PauseLengthUp => Action::PauseLengthDown,
        Action::RemoveWorker => Action::AddWorker,
        Action::NextStorage => Action::NextLock,
        Action::MomentForward => Action::MomentBack,
        Action::ZoomOut => Action::ZoomIn,
        other => other,
    }
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
        assert_eq!(press(KeyCode::Char('b')), Some(Action::Break));
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
