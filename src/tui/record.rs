//! Terminal recordings: an asciicast v2 file of exactly what fencelab wrote to the
//! screen, playable with `asciinema play`. Keys pressed become `"i"` events and lesson
//! steps `"m"` markers, so a viewer can see what was typed and jump between steps.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Everything the UI writes goes through here: to the terminal, and, when recording,
/// into the cast file as one `"o"` event per flushed frame.
pub struct Screen {
    out: Box<dyn Write + Send>,
    recording: Recording,
}

/// The cast file, shared by the screen (frames) and the event loop (keys, markers).
/// Empty when not recording.
#[derive(Clone, Default)]
pub struct Recording(Option<Arc<Mutex<Cast>>>);

struct Cast {
    file: BufWriter<File>,
    started: Instant,
    /// Output since the last flush: one frame.
    pending: Vec<u8>,
}

impl Screen {
    /// The terminal; with `record`, also a cast file of `width` x `height` (the
    /// terminal's size, which the header must state for players to lay it out).
    pub fn new(record: Option<&Path>, width: u16, height: u16) -> io::Result<(Self, Recording)> {
        let cast = match record {
            Some(path) => {
                let mut file = BufWriter::new(File::create(path)?);
                let header = serde_json::json!({
                    "version": 2,
                    "width": width,
                    "height": height,
                    "timestamp": std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    "title": "fencelab",
                    "env": { "TERM": std::env::var("TERM").unwrap_or_default() },
                });
                writeln!(file, "{header}")?;
                Some(Arc::new(Mutex::new(Cast {
                    file,
                    started: Instant::now(),
                    pending: Vec::new(),
                })))
            }
            None => None,
        };
        let recording = Recording(cast);
        Ok((Screen { out: Box::new(io::stdout()), recording: recording.clone() }, recording))
    }

    /// A screen that writes to `out` (a terminal elsewhere: a student's over SSH),
    /// unrecorded.
    pub fn to(out: impl Write + Send + 'static) -> Self {
        Screen { out: Box::new(out), recording: Recording::default() }
    }
}

impl Recording {
    fn cast(&self) -> Option<std::sync::MutexGuard<'_, Cast>> {
        self.0.as_ref().map(|c| c.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A key the person pressed, as an `"i"` event.
    pub fn input(&mut self, text: &str) {
        self.event("i", text);
    }

    /// A named point in the recording (a lesson step), as an `"m"` event.
    pub fn marker(&mut self, label: &str) {
        self.event("m", label);
    }

    fn event(&mut self, kind: &str, data: &str) {
        if let Some(mut cast) = self.cast() {
            let t = cast.started.elapsed().as_secs_f64();
            // A recording that cannot be written must not stop the session.
            let _ = writeln!(cast.file, "{}", serde_json::json!([round(t), kind, data]));
        }
    }
}

/// Microseconds are as precise as asciinema records.
fn round(t: f64) -> f64 {
    (t * 1e6).round() / 1e6
}

impl Write for Screen {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(mut cast) = self.recording.cast() {
            cast.pending.extend_from_slice(buf);
        }
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(mut cast) = self.recording.cast()
            && !cast.pending.is_empty()
        {
            let frame = String::from_utf8_lossy(&cast.pending).into_owned();
            cast.pending.clear();
            let t = round(cast.started.elapsed().as_secs_f64());
            writeln!(cast.file, "{}", serde_json::json!([t, "o", frame]))?;
            cast.file.flush()?;
        }
        self.out.flush()
    }
}

/// How a key event is written as input: its character, or a name in angle brackets.
pub fn key_text(key: &ratatui::crossterm::event::KeyEvent) -> String {
    use ratatui::crossterm::event::KeyCode;
    match key.code {
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "\r".to_string(),
        KeyCode::Esc => "\u{1b}".to_string(),
        other => format!("<{other:?}>"),
    }
}
