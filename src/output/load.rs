//! Reading a saved event log back (`fencelab replay`): JSON lines as `--save` writes
//! them, one or more runs, each starting with `run_started`. A damaged line, a log from
//! another format version, an empty file, a negative time or a time going backwards is
//! an error naming the file and line: every view (the cursor's binary search, the
//! picture's columns) relies on a run's events being in time order.

use std::path::Path;

use crate::engine::log::{Event, EventKind, LOG_FORMAT_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {file}: {reason}")]
    Unreadable { file: String, reason: String },
    #[error("{file} is empty: no events to replay (save a run with --save FILE)")]
    Empty { file: String },
    #[error("{file}:{line}:{column}: not a fencelab event ({reason})")]
    Damaged { file: String, line: usize, column: usize, reason: String },
    #[error(
        "{file}:{line}: this log was written in format version {found}; this fencelab reads version {LOG_FORMAT_VERSION}"
    )]
    Version { file: String, line: usize, found: u64 },
    #[error(
        "{file}:{line}: \"version\" must be the number {LOG_FORMAT_VERSION}, not {found} (is this a fencelab log?)"
    )]
    VersionNotNumber { file: String, line: usize, found: String },
    #[error("{file}:{line}: a log starts with a run_started event (is this a fencelab log?)")]
    NoStart { file: String, line: usize },
    #[error(
        "{file}:{line}: {field} is {t_ms}: times in a log are milliseconds from the run's start, never negative"
    )]
    NegativeTime { file: String, line: usize, field: &'static str, t_ms: f64 },
    #[error(
        "{file}:{line}: t_ms {t_ms} goes back in time (line {previous_line} was at {previous}): a log's events are in time order"
    )]
    OutOfOrder { file: String, line: usize, t_ms: f64, previous_line: usize, previous: f64 },
    #[error(
        "{file}:{line}: the line is longer than {max} bytes: no fencelab event is that long (is this a fencelab log?)"
    )]
    LineTooLong { file: String, line: usize, max: usize },
    #[error(
        "{file}: more than {max} bytes: a saved log that large is not one fencelab wrote for a run (the longest runs save a few hundred MB)"
    )]
    TooLarge { file: String, max: u64 },
}

/// The longest line read: a run's start holds its whole scenario (26 workers of up
/// to 1000 steps is under 2 MB); anything longer is not an event, and reading it
/// whole would let one line take all the memory there is.
pub const MAX_LINE_BYTES: usize = 8 << 20;

/// The most a log may hold in all: about seven million events, a few GB once read.
pub const MAX_LOG_BYTES: u64 = 1 << 30;

/// Every run in the file, each a list of events starting with `run_started`.
pub fn load_runs(path: &Path) -> Result<Vec<Vec<Event>>, LoadError> {
    let file = path.display().to_string();
    let unreadable =
        |e: std::io::Error| LoadError::Unreadable { file: file.clone(), reason: e.to_string() };
    // Line by line: a log of hundreds of MB is never held whole next to its events.
    let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(unreadable)?);
    parse_lines(bounded_lines(reader, &file), &file)
}

/// The lines of `reader`, each read only up to [`MAX_LINE_BYTES`] and all of them up
/// to [`MAX_LOG_BYTES`]: a longer line, or more, ends the reading with an error
/// before it is held in memory.
fn bounded_lines<R: std::io::BufRead>(
    mut reader: R,
    file: &str,
) -> impl Iterator<Item = Result<String, LoadError>> {
    let (file, mut number, mut total, mut done) = (file.to_string(), 0, 0u64, false);
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        number += 1;
        let line = next_line(&mut reader, &file, number, &mut total).transpose();
        done = !matches!(line, Some(Ok(_)));
        line
    })
}

/// Line `number` of `reader` (None at the end), `total` the bytes read so far.
fn next_line(
    reader: &mut impl std::io::BufRead,
    file: &str,
    number: usize,
    total: &mut u64,
) -> Result<Option<String>, LoadError> {
    use std::io::{BufRead, Read};
    let mut bytes = Vec::new();
    let limit = MAX_LINE_BYTES as u64 + 1;
    let read = reader
        .by_ref()
        .take(limit)
        .read_until(b'\n', &mut bytes)
        .map_err(|e| LoadError::Unreadable { file: file.to_string(), reason: e.to_string() })?;
    if read == 0 {
        return Ok(None);
    }
    *total += read as u64;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    } else if bytes.len() > MAX_LINE_BYTES {
        let (file, max) = (file.to_string(), MAX_LINE_BYTES);
        return Err(LoadError::LineTooLong { file, line: number, max });
    }
    if *total > MAX_LOG_BYTES {
        return Err(LoadError::TooLarge { file: file.to_string(), max: MAX_LOG_BYTES });
    }
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    String::from_utf8(bytes).map(Some).map_err(|_| LoadError::Damaged {
        file: file.to_string(),
        line: number,
        column: 1,
        reason: "not UTF-8 text".into(),
    })
}

/// The same, from text already read (`file` names it in errors).
pub fn parse_runs(text: &str, file: &str) -> Result<Vec<Vec<Event>>, LoadError> {
    parse_lines(text.lines().map(|l| Ok(l.to_string())), file)
}

fn parse_lines(
    lines: impl Iterator<Item = Result<String, LoadError>>,
    file: &str,
) -> Result<Vec<Vec<Event>>, LoadError> {
    let mut runs: Vec<Vec<Event>> = Vec::new();
    // The line and time of the run's latest event, to refuse time going backwards.
    let mut latest: Option<(usize, f64)> = None;
    for (i, line) in lines.enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let line = line.as_str();
        let number = i + 1;
        // Most lines are events of this format: read them straight, once. A run's
        // start, and any line that does not read, go the careful way below.
        let event = match serde_json::from_str::<Event>(line) {
            Ok(event) if !matches!(event.kind, EventKind::RunStarted { .. }) => Some(event),
            _ => None,
        };
        let event = match event {
            Some(event) => event,
            None => checked_event(line, file, number)?,
        };
        let t_ms = event.t_ms;
        // NaN too, which JSON cannot hold but a lenient writer might put there.
        let times = [("t_ms", Some(t_ms)), ("happened_ms", event.happened_ms)];
        for (field, time) in times {
            if let Some(t_ms) = time.filter(|t| t.is_nan() || *t < 0.0) {
                let file = file.to_string();
                return Err(LoadError::NegativeTime { file, line: number, field, t_ms });
            }
        }
        if matches!(event.kind, EventKind::RunStarted { .. }) {
            latest = None;
        }
        if let Some((previous_line, previous)) = latest
            && t_ms < previous
        {
            return Err(LoadError::OutOfOrder {
                file: file.to_string(),
                line: number,
                t_ms,
                previous_line,
                previous,
            });
        }
        latest = Some((number, t_ms));
        match (&event.kind, runs.last_mut()) {
            (EventKind::RunStarted { .. }, _) => runs.push(vec![event]),
            (_, Some(run)) => run.push(event),
            (_, None) => return Err(LoadError::NoStart { file: file.to_string(), line: number }),
        }
    }
    if runs.is_empty() {
        return Err(LoadError::Empty { file: file.to_string() });
    }
    Ok(runs)
}

/// One line read with care: the version of a run's start is checked before the shape
/// (a newer format may not parse at all), and a line that does not read says where.
fn checked_event(line: &str, file: &str, number: usize) -> Result<Event, LoadError> {
    let damaged = |e: serde_json::Error| LoadError::Damaged {
        file: file.to_string(),
        line: number,
        column: e.column().max(1),
        reason: e.to_string().split(" at line").next().unwrap_or_default().to_string(),
    };
    let raw: serde_json::Value = serde_json::from_str(line).map_err(damaged)?;
    if raw.get("type").and_then(|t| t.as_str()) == Some("run_started") {
        let version = raw.get("version");
        let Some(found) = version.and_then(|v| v.as_u64()) else {
            let found = version.map_or("missing".to_string(), |v| v.to_string());
            return Err(LoadError::VersionNotNumber {
                file: file.to_string(),
                line: number,
                found,
            });
        };
        if found != u64::from(LOG_FORMAT_VERSION) {
            return Err(LoadError::Version { file: file.to_string(), line: number, found });
        }
    }
    serde_json::from_value(raw).map_err(damaged)
}
