//! One SSH connection to the room: a student admitted by their password, one session
//! channel with a terminal, and their screen on it, which is the shell. Everything
//! else a client may ask for (a command, a subsystem, another channel, forwarding)
//! is refused.

use std::io::Write;
use std::sync::Arc;

use ratatui::crossterm::event::Event;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Size;
use russh::server::{Auth, ChannelOpenHandle, Handler, Msg, Session};
use russh::{Channel, ChannelId, ChannelOpenFailure, MethodKind, MethodSet, Pty};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::Seats;
use super::wire::{self, ChannelOut};
use crate::runtime::Shutdown;
use crate::tui::record::Screen;
use crate::tui::terminal::Drawn;
use crate::tui::{Ui, class};

/// One connection's state, from its password to its last byte.
pub struct Visit {
    seats: Arc<Seats>,
    /// The student admitted on this connection: their name and join URL.
    student: Option<(String, String)>,
    /// Whether their screen is up on this connection (their seat taken).
    seated: bool,
    /// The one session channel, once opened.
    channel: Option<ChannelId>,
    /// Whether the channel has a terminal (the screen needs one).
    terminal: bool,
    size: watch::Sender<Size>,
    /// The screen's keys and resizes, once it is up.
    keys: Option<mpsc::UnboundedSender<Event>>,
    keyboard: wire::Keyboard,
    /// The screen's: requested when the connection goes, or the room closes.
    shutdown: Shutdown,
    /// Cancelled once the screen has ended and said goodbye.
    left: CancellationToken,
    /// Cancelled once a student's password is accepted.
    admitted: CancellationToken,
}

impl Visit {
    /// A connection to `seats`' room whose screen quits with `shutdown`; and the tokens
    /// cancelled when its screen has ended, and when its student is admitted.
    pub fn new(
        seats: Arc<Seats>,
        shutdown: Shutdown,
    ) -> (Visit, CancellationToken, CancellationToken) {
        let (left, admitted) = (CancellationToken::new(), CancellationToken::new());
        let visit = Visit {
            seats,
            student: None,
            seated: false,
            channel: None,
            terminal: false,
            size: watch::Sender::new(Size::new(80, 24)),
            keys: None,
            keyboard: wire::Keyboard::default(),
            shutdown,
            left: left.clone(),
            admitted: admitted.clone(),
        };
        (visit, left, admitted)
    }

    fn ours(&self, channel: ChannelId) -> bool {
        self.channel == Some(channel)
    }

    /// The student's screen on `channel`, in a task of its own: the screen a `join`
    /// shows, then a line saying how it ended, then the channel closed.
    fn show(&mut self, channel: ChannelId, session: &Session) {
        let Some((_, url)) = self.student.clone() else { return };
        let handle = session.handle();
        let (mut out, sender) = ChannelOut::start(handle.clone(), channel);
        let (keys, input) = mpsc::unbounded_channel();
        self.keys = Some(keys);
        let drawn = Drawn::remote(Screen::to(out.another()), self.size.subscribe());
        let (shutdown, left) = (self.shutdown.clone(), self.left.clone());
        let ended = shutdown.clone();
        let program = self.seats.program.clone();
        tokio::spawn(async move {
            let _ = execute!(out, terminal::EnterAlternateScreen, cursor::Hide);
            let shown = match Ui::remote(drawn, input, shutdown) {
                Ok(ui) => class::attend_on(ui, url, (program, None)).await,
                Err(e) => Err(e),
            };
            let _ = execute!(out, cursor::Show, terminal::LeaveAlternateScreen);
            let status = match shown {
                Ok(()) => {
                    let how = if ended.is_requested() {
                        "the class is over"
                    } else {
                        "you left the class"
                    };
                    let _ = write!(out, "fencelab: {how}\r\n");
                    0
                }
                Err(e) => {
                    let _ = write!(out, "fencelab: {e:#}\r\n");
                    1
                }
            };
            let _ = out.flush();
            out.finish();
            let _ = sender.await;
            let _ = handle.exit_status_request(channel, status).await;
            let _ = handle.eof(channel).await;
            let _ = handle.close(channel).await;
            left.cancel();
        });
    }
}

impl Handler for Visit {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        if self.student.is_some() {
            return Ok(Auth::reject());
        }
        Ok(match self.seats.admit(user, password) {
            Some(seat) => {
                self.student = Some((seat.name.clone(), seat.url.clone()));
                self.admitted.cancel();
                Auth::Accept
            }
            // Try again, with a password: the only way in (an empty list would send
            // OpenSSH's client off trying others, each a delay).
            None => Auth::Reject {
                proceed_with_methods: Some(MethodSet::from(&[MethodKind::Password][..])),
                partial_success: false,
            },
        })
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if self.channel.is_some() || self.student.is_none() {
            reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
        } else {
            self.channel = Some(channel.id());
            reply.accept().await;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _: &str,
        columns: u32,
        rows: u32,
        _: u32,
        _: u32,
        _: &[(Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if !self.ours(channel) || self.keys.is_some() {
            return session.channel_failure(channel);
        }
        self.terminal = true;
        self.size.send_replace(size_of(columns, rows));
        session.channel_success(channel)
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if !self.ours(channel) || self.keys.is_some() {
            return session.channel_failure(channel);
        }
        session.channel_success(channel)?;
        let Some((name, _)) = &self.student else { return session.close(channel) };
        // `ssh -T`, or input not from a terminal: there is nothing to draw on.
        let refused = if !self.terminal {
            Some("the class's screen needs a terminal: connect with `ssh -t`".to_string())
        } else if !self.seats.sit(name) {
            Some(format!(
                "{name} is in the class already, from another connection: quit that one first"
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            session.data(channel, format!("fencelab: {why}\r\n").into_bytes())?;
            session.exit_status_request(channel, 1)?;
            return session.close(channel);
        }
        self.seated = true;
        self.show(channel, session);
        Ok(())
    }

    /// A command (`ssh alice@host ls`): nothing is run here but the screen.
    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let (true, Some(keys)) = (self.ours(channel), &self.keys) {
            for key in self.keyboard.keys(data) {
                let _ = keys.send(key);
            }
        }
        Ok(())
    }

    async fn window_change_request(
        &mut self,
        channel: ChannelId,
        columns: u32,
        rows: u32,
        _: u32,
        _: u32,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if self.ours(channel) {
            let size = size_of(columns, rows);
            self.size.send_replace(size);
            // Any event redraws the screen, which then finds its new size.
            if let Some(keys) = &self.keys {
                let _ = keys.send(Event::Resize(size.width, size.height));
            }
        }
        Ok(())
    }
}

/// A size a terminal said, within what a screen can be.
fn size_of(columns: u32, rows: u32) -> Size {
    let clamp = |n: u32| u16::try_from(n).unwrap_or(u16::MAX).max(1);
    Size::new(clamp(columns), clamp(rows))
}

impl Drop for Visit {
    fn drop(&mut self) {
        // The connection is gone: its screen quits as the student quitting would.
        self.shutdown.token().cancel();
        if let (true, Some((name, _))) = (self.seated, &self.student) {
            self.seats.leave(name);
        }
    }
}
