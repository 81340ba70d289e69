//! The smaller panels: header, tokens, storage, hint line, safety monitor, commands
//! inspector and footer.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::super::app::{App, ClassSeat, violation_time};
use super::super::keys::{Action, BINDINGS, Binding, InReplay};
use super::fit::{cut, first_fitting, title_room, width};
use super::timeline::secs;
use crate::check::Violation;
use crate::engine::log::{Refusal, RunOutcome};
use crate::scenario::StorageKind;
use crate::scenario::spec::SQL_WORDS;
use crate::view_model::{Belief, at};

/// A bordered panel in `area`, its title cut to fit.
fn block(title: &str, area: Rect, app: &App) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme().border)
        .title(cut(title, title_room(area)))
        .title_style(app.theme().title)
}

/// Keep the last lines that fit in `area` (newest at the bottom).
fn tail<T>(items: &[T], area: Rect) -> &[T] {
    let room = area.height.saturating_sub(2) as usize;
    &items[items.len().saturating_sub(room)..]
}

/// One line: what runs and how. Run state, speed and the fencing badge come first
/// and always fit; the title and the server's address take what room is left (a
/// socket path is the first thing to go). A lesson's name stays: short of room, the
/// address goes, then the "fencelab" before the state and the badge's token name,
/// and only then is the name cut.
pub fn header(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let run = &app.run();
    let view = app.view_ms() / 1000.0;
    let state = match (&run.ended, app.moment()) {
        (_, Some(m)) => format!("◆ MOMENT {:.3} s", m / 1000.0),
        _ if app.replay().is_some_and(|r| r.playing) => format!("▶ REPLAY {view:.3} s"),
        _ if app.replay().is_some() => format!("‖ REPLAY {view:.3} s"),
        _ if run.lost.is_some() => {
            format!("✖ SERVER LOST at {:.1} s", run.lost.as_ref().map_or(view, |l| l.0 / 1000.0))
        }
        (Some((_, RunOutcome::Failed { .. })), _) => format!("✖ FAILED at {view:.1} s"),
        _ if app.held() || app.held_by_projector() => format!("‖ HELD {view:.1} s"),
        (Some(_), _) => format!("■ ENDED {view:.1} s"),
        (None, _) if run.lanes.is_empty() => "… starting".to_string(),
        (None, _) if app.simulated() && !app.sim_playing() => format!("‖ TIME STOPPED {view:.1} s"),
        (None, _) => format!("▶ LIVE {view:.1} s"),
    };
    let backend_style = if app.simulated() { t.simulator } else { t.backend };
    // Live, the setting the next writes get; in a replay, the run's at the cursor.
    let on = if app.replay().is_some() { run.fencing } else { app.fencing() };
    let fencing = if on { "ON ✔" } else { "OFF ✘" };
    let badge = |named: bool| match super::token_name(app).filter(|_| named) {
        Some(token) => format!(" FENCING ({token}) {fencing} "),
        None => format!(" FENCING {fencing} "),
    };
    let fencing_style = if on { t.fencing_on } else { t.fencing_off };
    let title = format!(" · {}", app.scenario().title);
    // No badge where no token is used: a queue's jobs and the SQL lessons' rows.
    let badged = app.uses_lock() && app.lock().can.fencing;
    let parts = |full: bool| {
        let mut spans = vec![
            Span::styled(if full { " fencelab · " } else { " " }, t.title),
            Span::styled(state.clone(), t.title),
            Span::styled(format!(" · speed {}x ", app.speed()), t.dim),
        ];
        if badged {
            spans.push(Span::styled(badge(full), fencing_style));
        }
        spans
    };
    let room = |spans: &[Span]| {
        let used: usize = spans.iter().map(|s| s.width()).sum();
        (area.width as usize).saturating_sub(used)
    };
    // The screen always says what runs: at the least, the simulator or the server.
    let least = match app.simulated() {
        true => "SIMULATOR".to_string(),
        false => app.servers_in_words(),
    };
    let mut spans = parts(true);
    let keeps_title = app.lesson().is_some();
    if keeps_title && width(&title) + width(&least) + 3 > room(&spans) {
        spans = parts(false);
    }
    let room = room(&spans);
    let mut backend = short_backend(app.backend_label(), room.saturating_sub(width(&title) + 3));
    // A class's label names its room, which its screens need more than the server.
    let in_words = keeps_title && app.class_seat().is_none();
    if in_words && (backend.is_empty() || backend.ends_with('…')) {
        // A lesson keeps its name, and names what runs in a word rather than cut.
        backend = least;
        spans.push(Span::styled(cut(&title, room.saturating_sub(width(&backend) + 3)), t.dim));
    } else if !backend.is_empty() && width(&title) + width(&backend) + 3 <= room {
        spans.push(Span::styled(title, t.dim));
    } else {
        // The title goes before the backend does.
        backend = short_backend(app.backend_label(), room.saturating_sub(3));
    }
    if !backend.is_empty() {
        spans.push(Span::styled(" · ", t.dim));
        spans.push(Span::styled(backend, backend_style));
    }
    Paragraph::new(Line::from(spans)).style(t.base).render(area, buf);
}

/// The backend's description in at most `room` columns: without its socket path or
/// address first, then cut.
fn short_backend(label: &str, room: usize) -> String {
    if width(label) <= room {
        return label.to_string();
    }
    let short = without_addresses(label);
    if width(&short) <= room {
        return short;
    }
    if room < 4 {
        return String::new();
    }
    cut(&short, room)
}

/// The backend's description without its addresses (URLs, socket paths, host:port),
/// still a sentence: "private etcd (etcd lease lock) at http://…, storage: …" loses
/// its "at" with the address and keeps the comma.
fn without_addresses(label: &str) -> String {
    let address = |w: &str| {
        let w = w.trim_end_matches(',');
        let host_port = w.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
        });
        w.contains("://") || w.starts_with('/') || host_port
    };
    let mut words: Vec<String> = Vec::new();
    for word in label.split(' ') {
        if !address(word) {
            words.push(word.to_string());
            continue;
        }
        if words.last().is_some_and(|w| w == "at") {
            words.pop();
        }
        if word.ends_with(',')
            && let Some(last) = words.last_mut()
        {
            last.push(',');
        }
    }
    words.join(" ")
}

pub fn tokens(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let run = &app.run();
    let view = app.view_ms();
    let accepts = match (run.fencing, run.highest_accepted()) {
        (true, Some(h)) => format!("tokens ≥ {h} only"),
        (true, None) => {
            let room = title_room(area).saturating_sub(width("storage takes  "));
            first_fitting(&["any token, then only higher", "then only higher"], room)
        }
        (false, _) => "any token (no check)".to_string(),
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled("fence counter  ", t.dim),
            Span::styled(run.fence_counter().to_string(), t.title),
            Span::styled(format!(" ({})", app.token_source()), t.dim),
        ]),
        Line::from(vec![
            Span::styled("storage max    ", t.dim),
            Span::styled(
                run.highest_accepted().map_or("-".to_string(), |h| h.to_string()),
                t.title,
            ),
            Span::styled(" (highest accepted)", t.dim),
        ]),
        Line::from(vec![Span::styled("storage takes  ", t.dim), Span::styled(accepts, t.title)]),
    ];
    for l in &run.lanes {
        let belief = at(&l.spans, view).unwrap_or(Belief::Idle);
        // `-`: no grant yet; a grant without a token (0) says so.
        let token = match l.last_token {
            None => "token -".to_string(),
            Some(tk) => super::token_cell(Some(tk).filter(|tk| *tk != 0)),
        };
        let grant = app.lock().words.grant;
        let name = format!("{:<3} {token:<9} ", l.name);
        let room = title_room(area).saturating_sub(width(&name));
        let (what, style) = match belief.held_token() {
            Some(_) if run.holder_at(view) != Some(l.name.as_str()) => {
                let believes = format!("believes it holds the {grant} ⚠");
                (first_fitting(&[&believes, "believes it holds it ⚠"], room), t.danger)
            }
            Some(_) => (format!("holds the {grant}"), t.holding),
            None => (String::new(), t.dim),
        };
        lines.push(Line::from(vec![Span::styled(name, t.base), Span::styled(what, style)]));
    }
    let title = super::token_name(app).map_or(" Tokens ".into(), |t| format!(" Tokens · {t} "));
    Paragraph::new(lines).block(block(&title, area, app)).render(area, buf);
}

pub fn storage(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let view = app.view_ms();
    let writes: Vec<_> = app.run().writes.iter().filter(|w| w.t_ms <= view).cloned().collect();
    let shown = tail(&writes, area);
    let first = writes.len() - shown.len();
    // Beside a narrow timeline (a projector) the rows drop their padding and the
    // verdict its long words, so the STALE mark is never what gets cut off.
    let compact = area.width.saturating_sub(2) < 38;
    let sql = app.scenario().storage == StorageKind::Postgres;
    let lines: Vec<Line> = shown
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let n = first + i + 1;
            if let Some(result) = &w.result {
                // A queue's repeat that its idempotency key kept out is refused.
                let (verdict, style) = match (w.accepted, w.stale) {
                    (false, _) => ("✘ REPEAT REFUSED", t.rejected),
                    (true, true) => ("⚠ DONE TWICE", t.danger),
                    (true, false) => ("✔", t.accepted),
                };
                let row = match compact {
                    true => format!("{n:>2}. {} {result} ", w.worker),
                    false => format!("{n:>3}. {:<3} {result} ", w.worker),
                };
                return Line::from(vec![Span::styled(row, t.base), Span::styled(verdict, style)]);
            }
            let token = super::token_cell(w.token);
            // A table answers with its row count: "UPDATE 0" is the rejection of
            // fencelab's fenced statement. A row a program inserted itself answers
            // "INSERT 0 1", or is not there; a write refused for want of a token never
            // reached the table.
            let (verdict, short, style) = match (w.accepted, w.stale, sql && !w.own) {
                (true, true, false) => ("✔ ACCEPTED ⚠ STALE", "✔ ⚠ STALE", t.danger),
                (true, true, true) => ("✔ UPDATE 1 ⚠ STALE", "✔ 1 ⚠ STALE", t.danger),
                (true, false, _) if w.own => ("✔ INSERT 0 1", "✔ INSERT", t.accepted),
                (true, false, false) => ("✔ accepted", "✔ accepted", t.accepted),
                (true, false, true) => ("✔ UPDATE 1", "✔ UPDATE 1", t.accepted),
                (false, _, sql) => match w.refused {
                    Some(Refusal::NoToken) => ("✘ REJECTED (no token)", "✘ REJECTED", t.rejected),
                    Some(Refusal::Repeat) => ("✘ REJECTED (a repeat)", "✘ REJECTED", t.rejected),
                    Some(Refusal::NotLanded) => ("✘ NOT COMMITTED", "✘ NO COMMIT", t.rejected),
                    _ if sql => ("✘ UPDATE 0 (stale)", "✘ UPDATE 0", t.rejected),
                    _ => ("✘ REJECTED (stale)", "✘ REJECTED", t.rejected),
                },
            };
            let (row, verdict) = match compact {
                true => (format!("{n:>2}. {} {token} ", w.worker), short),
                false => (format!("{n:>3}. {:<3} {token:<9} ", w.worker), verdict),
            };
            Line::from(vec![Span::styled(row, t.base), Span::styled(verdict, style)])
        })
        .collect();
    let lines = if lines.is_empty() { vec![Line::styled("no writes yet", t.dim)] } else { lines };
    Paragraph::new(lines).block(block(" Storage (newest last) ", area, app)).render(area, buf);
}

/// One line under the timeline: the inspected moment, the last status message, or
/// a hint for what to try next.
pub fn hint(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let run = &app.run();
    // Each line with shorter forms for a narrow screen, longest first.
    let (forms, style): (Vec<String>, Style) = if let Some(m) = app.moment() {
        let mut parts = vec![format!("at {:.3} s:", m / 1000.0)];
        for l in &run.lanes {
            let b = at(&l.spans, m).unwrap_or(Belief::Idle);
            parts.push(format!("{} {}", l.name, describe(b, app.tok_word())));
        }
        if app.uses_lock() {
            let holder = run.holder_at(m).unwrap_or("nobody");
            parts.push(format!("· {}: {holder}", app.service_name()));
        }
        (vec![parts.join("  ")], t.title)
    } else if app.posed().is_some_and(|p| p.is_open()) {
        // While a class's question waits, nothing here may comment on what comes
        // next; a student's answer, sent, is said.
        (vec![app.status().clone().unwrap_or_default()], t.title)
    } else if app.lesson().is_some_and(|l| l.open_checkpoint().is_some()) {
        // While a question waits, nothing here may comment on what comes next.
        (Vec::new(), t.dim)
    } else if let Some((forms, danger)) = yours(app) {
        (forms, if danger { t.danger } else { t.title })
    } else if let Some(forms) = danger(app) {
        (forms, t.danger)
    } else if let Some(status) = &app.status() {
        // The answer to the learner's last key comes before the paused worker's note.
        (vec![status.clone()], t.title)
    } else if let Some(text) = paused(app) {
        (vec![text], t.danger)
    } else if let Some(text) = room_notes(app) {
        (vec![text], t.danger)
    } else if app.held() {
        // Held at a step: the run may be over in the log, not on the screen yet.
        (Vec::new(), t.dim)
    } else if run.ended.is_some() && app.class_seat().is_some() {
        (vec!["Run over. ← → to inspect any moment, q quits.".to_string()], t.dim)
    } else if app.class_seat() == Some(&ClassSeat::Instructor) {
        let keys = "↑↓ a student · space freezes (SIGSTOP) or thaws their worker";
        let short = "↑↓ a student · space freezes or thaws · x crash · f fencing";
        (vec![format!("{keys} · x crash · f fencing"), short.to_string()], t.dim)
    } else if run.ended.is_some() {
        (run_over(app), t.dim)
    } else if app.lesson().is_some()
        || app.class_seat().is_some()
        || !app.uses_lock()
        || run.lanes.is_empty()
    {
        (Vec::new(), t.dim)
    } else {
        let long =
            "Press 1 to pause A mid-lease (like a GC pause), f to switch fencing, ? for help.";
        let short = "1 pauses A mid-lease (a GC pause), f switches fencing, ? help";
        (vec![long.to_string(), short.to_string()], t.dim)
    };
    let forms: Vec<&str> = forms.iter().map(String::as_str).collect();
    let text = first_fitting(&forms, usize::from(area.width).saturating_sub(1));
    Paragraph::new(Line::styled(format!(" {text}"), style)).render(area, buf);
}

/// What the keys do once the run is over, in as many words as fit.
fn run_over(app: &App) -> Vec<String> {
    let Some(label) = app.replay().is_none().then(|| app.compare_label()) else {
        return vec![
            "Run over. ← → to inspect any moment, r to restart, ? for help.".into(),
            "Run over. ← → inspect, r restarts.".into(),
        ];
    };
    vec![
        format!(
            "Run over. ← → to inspect any moment, c to run \"{label}\" below this one, r to restart, ? for help."
        ),
        format!("Run over. ← → to inspect, c runs \"{label}\" below, r restarts."),
        format!("Run over. c runs \"{label}\" below, r restarts."),
    ]
}

/// On the projector: who left the class and what the room refused of whom, counted
/// ("⚠ room: alice left · bob: 31 refused, the latest: ...").
fn room_notes(app: &App) -> Option<String> {
    if app.class_seat() != Some(&ClassSeat::Instructor) {
        return None;
    }
    let run = &app.run();
    let mut notes: Vec<String> =
        run.left.iter().map(|s| format!("{s} left (counted as crashed)")).collect();
    notes.extend(
        run.refused.iter().map(|(s, (n, why))| format!("{s}: {n} refused, the latest: {why}")),
    );
    (!notes.is_empty()).then(|| format!("⚠ room: {}", notes.join(" · ")))
}

/// A student's own situation in a class, said to them (and whether it is the danger):
/// the point of the class is that, seen from inside, a frozen worker still holds the
/// lock, before, while and after it is frozen.
fn yours(app: &App) -> Option<(Vec<String>, bool)> {
    let Some(ClassSeat::Student(me)) = app.class_seat() else { return None };
    let me = me.as_str();
    let lane = app.run().lanes.iter().find(|l| l.name == me)?;
    let now = app.view_ms();
    let belief = at(&lane.spans, now).unwrap_or(Belief::Idle);
    let holder = app.run().holder_at(now);
    let frozen = matches!(belief, Belief::Paused { .. });
    let text = match (belief.held_token(), frozen) {
        (Some(token), _) if holder != Some(me) => {
            let truth = holder.map_or("nobody holds it".to_string(), |h| format!("{h} holds it"));
            let state = if frozen { "you are frozen, and " } else { "" };
            let service = app.service_name();
            let next = format!("{service} says {truth}: your next write is stale");
            let token = token_words(token);
            let text = format!("⚠ {me}: {state}you still hold the lock ({token}); {next}");
            let short =
                format!("⚠ {me}: you still hold the lock ({token}): your next write is stale");
            return Some((vec![text, short], true));
        }
        (Some(token), true) => {
            format!("you are frozen; you still hold the lock ({})", token_words(token))
        }
        (Some(token), false) => format!("you hold the lock ({})", token_words(token)),
        (None, true) => "you are frozen".to_string(),
        (None, false) => match belief {
            Belief::Waiting => "you are waiting for the lock".to_string(),
            Belief::Crashed => "your worker crashed".to_string(),
            _ => return None,
        },
    };
    Some((vec![format!("{me}: {text}")], false))
}

/// A worker that believes what the servers no longer say: what a learner must notice.
fn danger(app: &App) -> Option<Vec<String>> {
    let run = &app.run();
    if let Some((_, lost)) = &run.lost {
        return Some(vec![format!("✖ {lost}")]);
    }
    if run.ended.is_some() {
        return None;
    }
    let now = app.view_ms();
    let holder = run.holder_at(now);
    for l in &run.lanes {
        let b = at(&l.spans, now).unwrap_or(Belief::Idle);
        if let Some(job) = b.held_token().filter(|_| holder != Some(l.name.as_str())) {
            let truth = holder.map_or("nobody holds it".to_string(), |h| format!("{h} holds it"));
            if app.lock().queue {
                let now =
                    holder.map_or("it is no longer pending".into(), |h| format!("{h} has it"));
                let name = &l.name;
                let text = format!("⚠ {name} still believes job {job} is its own, but {now}.");
                return Some(vec![text, format!("⚠ {name} still believes job {job} is its own")]);
            }
            let (service, words) = (app.service_name(), &app.lock().words);
            // In the system's own words where it has them: "etcd's key is B's".
            let says = match (words.holder, holder) {
                ("holder", _) => format!("{service} says {truth}"),
                (what, Some(h)) => format!("{service}'s {what} is {h}'s"),
                (what, None) => format!("{service} lists no {what}"),
            };
            let (name, grant) = (&l.name, words.grant);
            return Some(vec![
                format!(
                    "⚠ {name} still believes it holds the {grant}, but {says}: its next write is stale."
                ),
                format!("⚠ {name} still believes it holds the {grant}: its next write is stale."),
            ]);
        }
    }
    None
}

/// A paused worker, and what it cannot notice while it sleeps.
fn paused(app: &App) -> Option<String> {
    let run = &app.run();
    if run.ended.is_some() {
        return None;
    }
    run.lanes.iter().find(|l| matches!(l.now(), Belief::Paused { .. })).map(|l| {
        // Without a lock there is no lease: what goes stale is what it read.
        let unnoticed =
            if app.uses_lock() { app.lock().words.unnoticed } else { SQL_WORDS.unnoticed };
        match l.now().held_token() {
            Some(_) => {
                format!("{} is paused: it sends nothing, so it cannot notice {unnoticed}.", l.name)
            }
            // It holds nothing: nothing of its own can run out while it sleeps.
            None => format!(
                "{} is paused: it sends nothing and holds no {}, so the others go on without it.",
                l.name,
                app.lock().words.grant
            ),
        }
    })
}

/// A worker's state in words; `tok` is the lock kind's word for a token.
fn describe(b: Belief, tok: &str) -> String {
    match b {
        Belief::Idle => "idle".into(),
        Belief::Waiting => "waiting".into(),
        Belief::Holding { token } => format!("holds {}", super::tok(tok, token)),
        Belief::Paused { token: Some(tk), .. } => format!("paused holding {}", super::tok(tok, tk)),
        Belief::Paused { .. } => "paused".into(),
        Belief::Released => "released".into(),
        Belief::Crashed => "crashed".into(),
        Belief::Done => "done".into(),
    }
}

pub fn monitor(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    // Up to the moment shown: a lesson frozen before a violation does not give it away.
    let view = app.view_ms();
    let violations: Vec<_> =
        app.run().violations.iter().filter(|v| violation_time(v) <= view).cloned().collect();
    let lines: Vec<Line> = if violations.is_empty() {
        // "So far" only while there is more of the run to come on screen.
        let over = app.log_ended().is_some_and(|end| view >= end);
        let said = if over {
            "✓ no safety violation in this run"
        } else {
            "✓ no safety violation so far"
        };
        vec![Line::styled(said, t.accepted)]
    } else {
        tail(&violations, area)
            .iter()
            .map(|v| {
                let style = if v.kind() == crate::check::ViolationKind::OverlappingBelief {
                    t.paused
                } else {
                    t.danger
                };
                let said = said(v, app, view);
                let row = format!("⚠ {:>7.3} s  {said}", violation_time(v) / 1000.0);
                Line::styled(cut(&row, title_room(area)), style)
            })
            .collect()
    };
    let title = format!(" Safety monitor · {} found · n: jump to next ", violations.len());
    Paragraph::new(lines).block(block(&title, area, app)).render(area, buf);
}

/// A violation as the screen says it: the exact moment is the line's first column, so
/// the sentence gives what lasted in the screen's own "1.0 s" (the header's, the lease
/// row's), and names the lock kind's own things ("job", "session").
fn said(v: &Violation, app: &App, view: f64) -> String {
    let words = &app.lock().words;
    let grant = words.grant;
    match v {
        Violation::OverlappingBelief { first, second, from_ms, to_ms, lapse, .. } => {
            // While the first still believes, the second may have let go already (a
            // quick holder, or an expiry told late): only the first's belief is sure.
            let why = crate::check::because(*lapse, app.lock());
            match to_ms {
                Some(to) => format!(
                    "{first} and {second} both believed they held the {grant}: {first} for {}{why}",
                    secs(to - from_ms)
                ),
                None => format!(
                    "{first} still believes it holds the {grant} {second} took, for {} so far{why}",
                    secs(view - from_ms)
                ),
            }
        }
        Violation::StaleWrite {
            worker, token, after_worker, after_token, by_grant: false, ..
        } => {
            format!(
                "stale write accepted: {worker}'s token {token} after {after_worker}'s token {after_token}"
            )
        }
        Violation::StaleWrite { worker, after_worker, .. } => format!(
            "stale write accepted: {worker}'s after {after_worker}'s, though {worker}'s grant came first (no tokens)"
        ),
        Violation::WriteByNonHolder { worker, token, redis_holder, .. } => {
            let holder = redis_holder.as_deref().unwrap_or("nobody");
            // In the lock's own word where it has one ("job number 1", "revision 3"),
            // unless a question still waiting asks for that word.
            let token = match super::token_name(app) {
                Some(_) => app.lock().numbered(*token),
                None => super::token_cell(*token),
            };
            format!("write accepted from {worker} ({token}) while {holder} held the {grant}")
        }
        Violation::DoneTwice { result, first, second, .. } => {
            format!("done twice: {second} {result:?}, which {first} had already done")
        }
    }
}

pub fn inspector(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let rows = tail(&app.run().commands, area);
    let lines: Vec<Line> = rows
        .iter()
        .map(|c| {
            let when = Span::styled(format!("{:>7.3} s {:<3}", c.t_ms / 1000.0, c.worker), t.dim);
            let Some(reply) = &c.reply else {
                // A program's own stderr line, where its commands are.
                return Line::from(vec![when, Span::styled(c.command.clone(), t.dim)]);
            };
            Line::from(vec![
                when,
                Span::styled(c.command.clone(), t.base),
                Span::styled(format!(" → {reply}"), t.title),
                Span::styled(format!("  {:.2} ms", c.latency_ms), t.dim),
            ])
        })
        .collect();
    // In slow motion on real servers the commands carry real durations (PX 4000 for
    // the narration's 2 s lease at half speed): the title says so.
    let scale = app.run().time_scale;
    let real = if scale > 0.0 && (scale - 1.0).abs() > 1e-9 {
        let times = format!("{scale:.2}");
        format!(" · real ms: {}x the scenario's", times.trim_end_matches('0').trim_end_matches('.'))
    } else {
        String::new()
    };
    // A lock on one server and the storage on another: both are in the list.
    let title = format!(" Commands sent (i to close) · {}{real} ", app.servers_in_words());
    Paragraph::new(lines).block(block(&title, area, app)).render(area, buf);
}

pub fn footer(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme();
    let mut spans = vec![Span::raw(" ")];
    // A class's lanes past a screenful: say first how to reach the rest.
    if app.lesson().is_none() && app.lanes_per_page() < app.run().lanes.len() {
        spans.push(Span::styled("PgUp/PgDn", t.key));
        spans.push(Span::styled(" more lanes  ", t.dim));
    }
    if let Some(ClassSeat::Student(_)) = app.class_seat() {
        // A student's keys answer the class's questions; the run is the instructor's.
        spans.push(Span::styled("1-9", t.key));
        spans.push(Span::styled(" answer a question  ", t.dim));
    }
    // The keys that work here, in the table's order, as many as fit whole: a key is
    // dropped, the least needed first, never cut.
    let room = (area.width as usize).saturating_sub(spans.iter().map(|s| s.width()).sum());
    let mut keys: Vec<(&Binding, &str)> = BINDINGS
        .iter()
        .filter(|b| usable_in_class(app, b.action) && works_here(app, b))
        .filter_map(|b| b.footer.map(|what| (b, what)))
        .collect();
    // Each key and its words, two spaces apart (the last two may be what is cut).
    let wide = |keys: &[(&Binding, &str)]| {
        keys.iter().map(|(b, what)| width(b.label) + 1 + width(what) + 2).sum::<usize>()
    };
    while wide(&keys) > room + 2
        && let Some(least) = (0..keys.len()).max_by_key(|i| (drop_first(keys[*i].0.action), *i))
    {
        keys.remove(least);
    }
    for (b, what) in keys {
        spans.push(Span::styled(b.label, t.key));
        spans.push(Span::styled(format!(" {what}  "), t.dim));
    }
    Paragraph::new(Line::from(spans)).style(Style::default()).render(area, buf);
}

/// How soon a footer key goes when the footer is too narrow (higher: sooner): the
/// commands inspector and a crash before a lesson's `c` and the pause keys; quit and
/// help last.
fn drop_first(action: Action) -> u8 {
    match action {
        Action::Quit => 0,
        Action::Help => 1,
        Action::PauseWorker(_) | Action::PauseSelected => 2,
        Action::Compare => 3,
        Action::HoldSelected => 4,
        Action::ToggleFencing => 5,
        Action::Restart => 6,
        Action::CrashSelected => 7,
        _ => 8,
    }
}

/// Whether a key does anything on this screen: fencing only where a lock hands out
/// tokens a storage can check (not a queue's jobs, not the SQL lessons' rows), and in
/// a replay only the keys a replay has.
fn works_here(app: &App, b: &Binding) -> bool {
    match b.action {
        _ if app.replay().is_some() && b.replay == InReplay::Cannot => false,
        Action::ToggleFencing => app.uses_lock() && app.lock().can.fencing,
        _ => true,
    }
}

/// Whether a key does something on this screen of a class: a class plays one run (no
/// restart, no compare), and on a student's screen only the view's keys work (the
/// instructor steers the workers and the fencing). Outside a class, every key.
fn usable_in_class(app: &App, action: Action) -> bool {
    let steers = matches!(
        action,
        Action::PauseWorker(_)
            | Action::PauseSelected
            | Action::HoldSelected
            | Action::CrashSelected
            | Action::ToggleFencing
    );
    let another_run = matches!(action, Action::Restart | Action::Compare | Action::Break);
    match app.class_seat() {
        None => true,
        Some(ClassSeat::Instructor) => !another_run,
        Some(ClassSeat::Student(_)) => !another_run && !steers,
    }
}

/// A student's status line spells the token out ("token 1"), or says it has none.
fn token_words(token: u64) -> String {
    if token == 0 { "no token".to_string() } else { format!("token {token}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Lapse;

    /// The monitor's sentence gives how long in the screen's "1.0 s", the moment being
    /// its first column ("A since 1.002s" read unlike the rest of the screen).
    #[test]
    fn an_overlap_is_said_in_the_screen_s_own_seconds_and_the_system_s_words() {
        let overlap = |to_ms, lapse| Violation::OverlappingBelief {
            first: "A".into(),
            second: "B".into(),
            from_ms: 1002.0,
            to_ms,
            lapse,
            seq: 1,
        };
        let app = |name: &str| {
            let scenario = crate::lesson::find(name).unwrap().unwrap().scenario;
            App::new(scenario, false, 1.0, true, "t".into(), crate::tui::theme::Theme::DEFAULT)
        };
        let said_now = said(&overlap(None, Lapse::Ended), &app("gc-pause"), 2040.0);
        assert_eq!(
            said_now,
            "A still believes it holds the lock B took, for 1.0 s so far, after its lease ended"
        );
        // No reason the log does not show.
        let said_then = said(&overlap(Some(3000.0), Lapse::Unknown), &app("gc-pause"), 4000.0);
        assert_eq!(said_then, "A and B both believed they held the lock: A for 2.0 s");
        let queue = said(&overlap(Some(2900.0), Lapse::Ended), &app("queue"), 4000.0);
        assert_eq!(
            queue,
            "A and B both believed they held the job: A for 1.9 s, after XAUTOCLAIM gave its job to another consumer"
        );
        assert!(!queue.contains("since") && !queue.contains("lock"), "{queue}");
    }

    /// A write by no holder names the grant's number in the lock's own word: a queue's
    /// job number is no token (a learner read "(token 1) while nobody held the job").
    #[test]
    fn a_write_by_no_holder_names_its_number_in_the_lock_s_word() {
        let write = Violation::WriteByNonHolder {
            worker: "A".into(),
            token: Some(1),
            redis_holder: None,
            at_ms: 2000.0,
            seq: 1,
        };
        let app = |name: &str| {
            let scenario = crate::lesson::find(name).unwrap().unwrap().scenario;
            App::new(scenario, false, 1.0, true, "t".into(), crate::tui::theme::Theme::DEFAULT)
        };
        let queue = said(&write, &app("queue"), 3000.0);
        assert_eq!(queue, "write accepted from A (job number 1) while nobody held the job");
        let redis = said(&write, &app("gc-pause"), 3000.0);
        assert_eq!(redis, "write accepted from A (token 1) while nobody held the lock");
    }

    /// In slow motion on real servers the inspector says its durations are real ones
    /// (PX 4000 for the narration's 2 s lease at half speed); at full speed, nothing.
    #[test]
    fn the_inspector_says_its_durations_are_real_in_slow_motion() {
        let title = |time_scale: f64| {
            let scenario = crate::lesson::find("gc-pause").unwrap().unwrap().scenario;
            let theme = crate::tui::theme::Theme::DEFAULT;
            let mut app = App::new(scenario.clone(), false, 0.5, true, "t".into(), theme);
            // The run as it starts on servers at this time scale.
            let started = crate::engine::log::EventKind::RunStarted {
                version: 1,
                run_id: "t".into(),
                scenario: std::sync::Arc::new(scenario),
                fencing: false,
                label: String::new(),
                backend: "Redis".into(),
                time_scale,
            };
            app.update(crate::tui::app::Msg::RunStarting);
            let event =
                crate::engine::log::Event { seq: 1, t_ms: 0.0, kind: started, happened_ms: None };
            app.update(crate::tui::app::Msg::Logged(vec![event]));
            let mut buf = Buffer::empty(Rect::new(0, 0, 100, 3));
            inspector(buf.area, &mut buf, &app);
            (0..100).map(|x| buf[(x, 0)].symbol()).collect::<String>()
        };
        assert!(title(2.0).contains("Redis · real ms: 2x the scenario's"), "{}", title(2.0));
        assert!(title(4.0 / 3.0).contains("real ms: 1.33x"), "{}", title(4.0 / 3.0));
        assert!(!title(1.0).contains("real ms"), "{}", title(1.0));
    }

    /// The inspector's title names every server whose commands it lists: lesson 16's
    /// lock on Redis and its UPDATEs on PostgreSQL.
    #[test]
    fn the_inspector_names_the_storage_s_server_beside_the_lock_s() {
        let title = |name: &str| {
            let scenario = crate::lesson::find(name).unwrap().unwrap().scenario;
            let theme = crate::tui::theme::Theme::DEFAULT;
            let app = App::new(scenario, false, 1.0, true, "t".into(), theme);
            let mut buf = Buffer::empty(Rect::new(0, 0, 80, 3));
            inspector(buf.area, &mut buf, &app);
            (0..80).map(|x| buf[(x, 0)].symbol().to_string()).collect::<String>()
        };
        assert!(
            title("postgres-fencing").contains("· Redis + PostgreSQL "),
            "{}",
            title("postgres-fencing")
        );
        assert!(title("gc-pause").contains("· Redis ─"), "{}", title("gc-pause"));
    }

    #[test]
    fn a_backend_without_its_addresses_is_still_a_sentence() {
        let etcd = "private etcd (etcd lease lock) at http://127.0.0.1:2379";
        assert_eq!(super::without_addresses(etcd), "private etcd (etcd lease lock)");
        let sql = "private redis-server unix:///tmp/x/redis.sock, storage: private PostgreSQL";
        assert_eq!(
            super::without_addresses(sql),
            "private redis-server, storage: private PostgreSQL"
        );
        let zk = "private ZooKeeper 127.0.0.1:40523 (lock recipe: ephemeral sequential znodes)";
        let short = super::without_addresses(zk);
        assert_eq!(short, "private ZooKeeper (lock recipe: ephemeral sequential znodes)");
        // A colon that is no port stays: "storage:", "recipe:".
        assert!(super::without_addresses("a (b: c)").contains("b:"));
    }
}
