//! What a search covered and found, in words: a "no violation" means only as much as
//! the space it was looked for in, so the space is always said.

use super::space::secs;
use super::{Found, Outcome, space};
use crate::scenario::FaultKind;

/// 12000 as "12,000".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What was taken out of the scenario to make the design searched.
pub fn design_line(o: &Outcome) -> String {
    let mut taken = vec![];
    if o.paused_steps > 0 {
        taken.push(format!(
            "{} scripted pause{} replaced by {} of work, so that a searched pause can land there",
            o.paused_steps,
            if o.paused_steps == 1 { "" } else { "s" },
            secs(space::PAUSE_SITE_MS)
        ));
    }
    if o.faults_taken > 0 {
        taken.push(format!("its {} fault(s) of the kinds searched taken out", o.faults_taken));
    }
    format!(
        "design: {} ({} lease, fencing {}){}{}",
        o.design.name,
        if o.design.ttl_ms == 0 { "no".to_string() } else { secs(o.design.ttl_ms) },
        if o.fencing { "on" } else { "off" },
        if taken.is_empty() { "" } else { "; " },
        taken.join("; ")
    )
}

/// The schedules tried, in words.
pub fn coverage(o: &Outcome) -> String {
    let singles = o.space.singles();
    let mut line = if o.singles >= singles {
        format!("all {}: {} schedules", o.space.describe(), thousands(singles))
    } else {
        format!(
            "{} of the {} {} (in a random order, seed {})",
            thousands(o.singles),
            thousands(singles),
            o.space.describe(),
            o.seed
        )
    };
    if o.at_moments > 0 {
        line = format!(
            "{} pause{} at the workers' own moments (after a grant, a renewal, a check; before a write), then {line}",
            o.at_moments,
            if o.at_moments == 1 { "" } else { "s" }
        );
    }
    if o.pairs > 0 {
        line.push_str(&format!(
            ", and {} random pairs of them (seed {})",
            thousands(o.pairs),
            o.seed
        ));
    }
    line
}

/// The closing lines: found, or covered without finding.
pub fn summary(o: &Outcome) -> Vec<String> {
    // Every run counts, the fault-free one and shrinking's too: the rate is the
    // machine's, what a longer budget would cost.
    let took = format!("{:.1} s, {} runs", o.elapsed.as_secs_f64(), thousands(o.runs));
    let per_s = rate(o.runs as f64 / o.elapsed.as_secs_f64().max(1e-3));
    let mut lines = Vec::new();
    if let (n @ 1.., Some(first)) = &o.failed {
        lines.push(format!(
            "{n} run{} ended with an error and {} not judged; the first: {first}",
            if *n == 1 { "" } else { "s" },
            if *n == 1 { "was" } else { "were" }
        ));
    }
    match &o.found {
        Some(found) if found.original.is_empty() => {
            lines.push("it breaks with no fault at all: its own steps are enough".to_string());
        }
        Some(found) => {
            lines.push(format!(
                "broke it after {} schedules ({took}, {per_s} trials/s): {}",
                thousands(o.tried()),
                story(&found.original)
            ));
            lines.push(format!(
                // A length a step past the shortest that broke can read as no shrinking
                // at all (5 s found, 5.1 s kept): the room is said where it shows.
                "shrunk in {} trials to the smallest story that still breaks it, with a little room to spare:",
                found.shrink_trials
            ));
            lines.extend(found.shrunk.iter().enumerate().map(|(i, m)| format!("  {}. {m}", i + 1)));
        }
        None => {
            let stop = if o.interrupted { "interrupted; covered so far: " } else { "" };
            let none = if o.fencing || !o.harmless.is_empty() {
                "no harmful violation"
            } else {
                "no violation"
            };
            lines.push(format!("{stop}{}: {none} ({took}, {per_s} trials/s)", coverage(o)));
            if o.fencing || !o.harmless.is_empty() {
                lines.push(harmless_line(o));
            }
            if let Some(unsteady) = &o.unsteady {
                lines.push(format!(
                    "one schedule broke it once but not when run again: {} (real runs race; not reported as a break)",
                    story(unsteady)
                ));
            }
        }
    }
    lines
}

/// Trials a second as a person reads them: one decimal below 100 (a real run takes
/// seconds: "0.3"), whole and grouped above ("16,991").
pub fn rate(per_s: f64) -> String {
    if per_s < 100.0 { format!("{per_s:.1}") } else { thousands(per_s.round() as u64) }
}

/// What held, in one short line for a status bar: the count first, the detail after.
pub fn short(o: &Outcome) -> String {
    let singles = if o.singles >= o.space.singles() {
        "every single fault".to_string()
    } else {
        format!("{} single faults", thousands(o.singles))
    };
    let pairs =
        if o.pairs > 0 { format!(", {} random pairs", thousands(o.pairs)) } else { String::new() };
    let stop = if o.interrupted { " (stopped)" } else { "" };
    format!("nothing broke it{stop}: {} schedules ({singles}{pairs})", thousands(o.tried()))
}

/// With fencing: the checker's findings were all of the harmless kind.
fn harmless_line(o: &Outcome) -> String {
    if o.harmless.is_empty() {
        return "with fencing: the checker found nothing at all".to_string();
    }
    let kinds: Vec<String> =
        o.harmless.iter().map(|(k, n)| format!("{k} in {} of them", thousands(*n))).collect();
    let kinds = space::and_list(&kinds);
    if o.fencing {
        format!(
            "with fencing, the checker found only what fencing makes harmless ({kinds}): the storage refused every stale write and took the writes in token order"
        )
    } else if o.design.lock.spec().queue {
        format!(
            "the checker found only what a queue's at-least-once delivery makes harmless ({kinds}): a job delivered again was done once, its repeat refused"
        )
    } else {
        format!(
            "the checker found only harmless findings ({kinds}): two workers believing is not two writing"
        )
    }
}

/// A schedule in one line.
pub fn story(schedule: &[space::Move]) -> String {
    if schedule.is_empty() {
        return "no fault".to_string();
    }
    let parts: Vec<String> = schedule.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// A counterexample's narration (Markdown, as `lessons/*.md`), saved beside it so that
/// `fencelab lesson` tells its story: the introduction says what the search did to
/// the design, a step at each fault says what it does, and a last step at the run's
/// end says what broke, from the expectation the file states. Nothing is told before
/// it happens: the breakage only at the end.
pub fn narration(found: &Found) -> String {
    let scenario = &found.scenario;
    let mut md = format!(
        "`fencelab break` found this schedule for {}, shrunk to the smallest story that \
         still breaks it (fencing tokens {}):\n\n{}\nWatch the lock and the storage.\n",
        scenario.name,
        if scenario.fencing { "on" } else { "off" },
        found.shrunk.iter().map(|m| format!("- {m}\n")).collect::<String>()
    );
    for m in &found.shrunk {
        let what = match m.kind {
            FaultKind::Pause => format!(
                "{} is frozen for {}: it sends nothing and hears nothing, while its lease \
                 keeps running on the server.",
                m.target,
                secs(m.ms)
            ),
            FaultKind::Delay => {
                format!("For {}, every reply to {} arrives late.", secs(m.ms), m.target)
            }
            FaultKind::ClockJump => format!("{}'s clock jumps {} ahead.", m.target, secs(m.ms)),
            FaultKind::Kill => {
                format!("{} is down for {}, and comes back empty.", m.target, secs(m.ms))
            }
            _ => format!("{m}."),
        };
        md += &format!("\n## {} {{at={}ms}}\n{what}\n", capitalised(&m.to_string()), m.at_ms);
    }
    let end_ms = found.events.last().map_or(0, |e| e.t_ms.floor() as u64);
    if let Some(expect) = scenario.expect.for_mode(scenario.fencing) {
        let writes: Vec<String> = expect
            .storage
            .iter()
            .map(|w| match w.split_once(':') {
                Some((who, "-")) => format!("{who} (no token)"),
                Some((who, token)) => format!("{who} (token {token})"),
                None => w.clone(),
            })
            .collect();
        let broke: Vec<String> =
            expect.violations.iter().map(|v| v.to_string().replace('-', " ")).collect();
        md += &format!(
            "\n## What broke {{at={end_ms}ms}}\nThe storage accepted {} in that order, and the \
             checker reports: {}.\n",
            if writes.is_empty() { "nothing".to_string() } else { writes.join(", then ") },
            if broke.is_empty() { "no violation".to_string() } else { broke.join(", ") }
        );
    }
    md
}

/// "a freezes" as "A freezes".
fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn rates_keep_a_decimal_where_a_person_needs_one() {
        assert_eq!(super::rate(0.07), "0.1");
        assert_eq!(super::rate(0.36), "0.4");
        assert_eq!(super::rate(16991.4), "16,991");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(super::thousands(12000), "12,000");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
