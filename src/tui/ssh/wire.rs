//! A terminal at the far end of an SSH channel: what the screen writes goes out as
//! channel data without the screen ever waiting on the network, and the bytes the
//! student's keyboard sends come back as the key events a local terminal gives.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use russh::ChannelId;
use russh::server::Handle;
use tokio::sync::Notify;

/// How far a student's terminal may fall behind (bytes drawn, not yet sent) before its
/// screen gives up: a client that stopped reading, not a slow one (a frame is a few
/// kilobytes).
pub const BEHIND_LIMIT: usize = 1 << 20;

/// What the screen writes, for one SSH channel: each flushed frame is queued for a
/// task of its own to send, so a client that reads slowly, or not at all, holds up
/// only its own sending.
pub struct ChannelOut {
    frame: Vec<u8>,
    queue: Arc<Queue>,
}

/// Frames drawn and not yet sent, and whether the sender is to stop once they are.
struct Queue {
    bytes: Mutex<Vec<u8>>,
    ready: Notify,
    finished: AtomicBool,
}

impl ChannelOut {
    /// A writer to `channel` of the session `handle`, and the task that sends what
    /// it writes (until [`ChannelOut::finish`] or the channel's end).
    pub fn start(handle: Handle, channel: ChannelId) -> (ChannelOut, tokio::task::JoinHandle<()>) {
        let queue = Arc::new(Queue {
            bytes: Mutex::default(),
            ready: Notify::new(),
            finished: AtomicBool::new(false),
        });
        let sending = queue.clone();
        let sender = tokio::spawn(async move {
            loop {
                let bytes = std::mem::take(&mut *sending.lock());
                if bytes.is_empty() {
                    if sending.finished.load(Ordering::SeqCst) {
                        return;
                    }
                    sending.ready.notified().await;
                    continue;
                }
                if handle.data(channel, bytes).await.is_err() {
                    return;
                }
            }
        });
        (ChannelOut { frame: Vec::new(), queue }, sender)
    }

    /// Another writer to the same channel, after this one's frames.
    pub fn another(&self) -> ChannelOut {
        ChannelOut { frame: Vec::new(), queue: self.queue.clone() }
    }

    /// No more frames: the sender ends once it has sent what is queued.
    pub fn finish(self) {
        self.queue.finished.store(true, Ordering::SeqCst);
        self.queue.ready.notify_one();
    }
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Write for ChannelOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.frame.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut queued = self.queue.lock();
        if queued.len() + self.frame.len() > BEHIND_LIMIT {
            return Err(io::Error::other(format!(
                "the terminal fell {} KiB behind: it has stopped reading",
                BEHIND_LIMIT / 1024
            )));
        }
        queued.append(&mut self.frame);
        drop(queued);
        self.queue.ready.notify_one();
        Ok(())
    }
}

/// The longest control string a terminal sends that is still read as one: past it,
/// what follows is taken as typed again, so a string that never ends cannot eat the
/// student's keys for good.
const LONGEST_STRING: usize = 4096;

/// A student's keyboard: the bytes their terminal sends, turned into the key events
/// a local terminal gives.
#[derive(Default)]
pub struct Keyboard {
    parser: anes::parser::Parser,
    /// Inside a control string (DCS, OSC, APC, PM, SOS) for this many bytes: a
    /// terminal's reply or report, which can run over several reads.
    string: Option<usize>,
}

impl Keyboard {
    /// The key events in `bytes` (escape sequences whole within one read, as a
    /// terminal sends them; a lone ESC is the Esc key).
    pub fn keys(&mut self, bytes: &[u8]) -> Vec<Event> {
        let typed = self.typed(bytes);
        self.parser.advance(&typed, false);
        self.parser
            .by_ref()
            .filter_map(|sequence| match sequence {
                anes::parser::Sequence::Key(anes::parser::KeyCode::Char(c), modifiers)
                    if ('\u{1}'..='\u{1a}').contains(&c) =>
                {
                    // A control character is its letter with Ctrl (Ctrl-C is 0x03), as
                    // a local terminal reports it.
                    let letter = char::from(b'a' + (c as u8 - 1));
                    let modifiers = key_modifiers(modifiers) | KeyModifiers::CONTROL;
                    Some(Event::Key(KeyEvent::new(KeyCode::Char(letter), modifiers)))
                }
                anes::parser::Sequence::Key(code, modifiers) => {
                    Some(Event::Key(KeyEvent::new(key_code(code)?, key_modifiers(modifiers))))
                }
                // Mouse reporting is never turned on over SSH, and the cursor never
                // asked for.
                _ => None,
            })
            .collect()
    }

    /// `bytes` without control strings: nothing in a terminal's reply was typed (the
    /// parser alone would read `ESC P ... q` as Alt-P, then a `q` that quits). A string
    /// starts with ESC and `P`, `]`, `_`, `^` or `X`, and ends with ST (ESC `\`), BEL,
    /// CAN or SUB, as ECMA-48 has it, or with any other ESC.
    fn typed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut typed = Vec::with_capacity(bytes.len());
        let mut rest = bytes.iter().copied().peekable();
        while let Some(byte) = rest.next() {
            match self.string {
                Some(n) if n >= LONGEST_STRING => {
                    self.string = None;
                    typed.push(byte);
                }
                Some(n) => match byte {
                    0x07 | 0x18 | 0x1a => self.string = None,
                    0x1b => {
                        self.string = None;
                        rest.next_if_eq(&b'\\');
                    }
                    _ => self.string = Some(n + 1),
                },
                None if byte == 0x1b
                    && rest
                        .next_if(|b| matches!(b, b'P' | b']' | b'_' | b'^' | b'X'))
                        .is_some() =>
                {
                    self.string = Some(0);
                }
                None => typed.push(byte),
            }
        }
        typed
    }
}

fn key_code(code: anes::parser::KeyCode) -> Option<KeyCode> {
    use anes::parser::KeyCode as K;
    Some(match code {
        K::Backspace => KeyCode::Backspace,
        K::Enter => KeyCode::Enter,
        K::Left => KeyCode::Left,
        K::Right => KeyCode::Right,
        K::Up => KeyCode::Up,
        K::Down => KeyCode::Down,
        K::Home => KeyCode::Home,
        K::End => KeyCode::End,
        K::PageUp => KeyCode::PageUp,
        K::PageDown => KeyCode::PageDown,
        K::Tab => KeyCode::Tab,
        K::BackTab => KeyCode::BackTab,
        K::Delete => KeyCode::Delete,
        K::Insert => KeyCode::Insert,
        K::F(n) => KeyCode::F(n),
        K::Char(c) => KeyCode::Char(c),
        K::Esc => KeyCode::Esc,
        K::Null => return None,
    })
}

fn key_modifiers(modifiers: anes::parser::KeyModifiers) -> KeyModifiers {
    use anes::parser::KeyModifiers as M;
    let mut out = KeyModifiers::empty();
    for (from, to) in [
        (M::SHIFT, KeyModifiers::SHIFT),
        (M::CONTROL, KeyModifiers::CONTROL),
        (M::ALT, KeyModifiers::ALT),
        (M::META, KeyModifiers::META),
    ] {
        if modifiers.contains(from) {
            out |= to;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> Event {
        Event::Key(KeyEvent::new(code, modifiers))
    }

    #[test]
    fn a_terminals_bytes_are_the_keys_a_local_terminal_gives() {
        let mut keyboard = Keyboard::default();
        let none = KeyModifiers::empty();
        // What OpenSSH sends for: q, Enter (CR), Down, Up, space, 2 (arrows as CSI: the
        // screen never turns on application cursor keys, which would send them as SS3).
        let got = keyboard.keys(b"q\r\x1b[B\x1b[A 2");
        let want = [
            key(KeyCode::Char('q'), none),
            key(KeyCode::Enter, none),
            key(KeyCode::Down, none),
            key(KeyCode::Up, none),
            key(KeyCode::Char(' '), none),
            key(KeyCode::Char('2'), none),
        ];
        assert_eq!(got, want);
        // Ctrl-C, and Esc alone.
        let got = keyboard.keys(b"\x03");
        assert_eq!(got, [key(KeyCode::Char('c'), KeyModifiers::CONTROL)]);
        assert_eq!(keyboard.keys(b"\x1b"), [key(KeyCode::Esc, none)]);
    }

    /// A terminal's replies (a DCS, an OSC ended by BEL, one split over two reads) are
    /// no keys: the `q` inside a DCS does not quit; and a string that never ends
    /// gives the keyboard back after [`LONGEST_STRING`] bytes.
    #[test]
    fn a_terminals_replies_are_not_typed() {
        let mut keyboard = Keyboard::default();
        let none = KeyModifiers::empty();
        let dcs = keyboard.keys(b"\x1bP1$r0 q\x1b\\2");
        assert_eq!(dcs, [key(KeyCode::Char('2'), none)]);
        let osc = keyboard.keys(b"\x1b]11;rgb:0000/0000/0000\x07 ");
        assert_eq!(osc, [key(KeyCode::Char(' '), none)]);
        assert_eq!(keyboard.keys(b"\x1bP>|tmux q"), []);
        assert_eq!(keyboard.keys(b"uit 3.4\x1b\\1"), [key(KeyCode::Char('1'), none)]);
        assert_eq!(keyboard.keys(b"\x1b[B"), [key(KeyCode::Down, none)]);
        keyboard.keys(b"\x1bP");
        keyboard.keys(&[b'x'; LONGEST_STRING]);
        assert_eq!(keyboard.keys(b"q"), [key(KeyCode::Char('q'), none)]);
    }
}
