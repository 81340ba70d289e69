//! Command-line definitions (clap). Parsing only; `commands` does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "fencelab",
    version,
    about = "Distributed locks, leases and fencing tokens, run for real on Redis",
    long_about = "Workers compete for a lock on a real Redis. Pause one (as a GC pause would), \
                  watch its lease expire while it still believes it holds the lock, see its stale \
                  write land, then turn on fencing tokens and watch the storage reject it.\n\n\
                  Without a subcommand, fencelab opens the interactive playground; \
                  `fencelab run gc-pause` prints the experiment as text.\n\n\
                  Your own lock, in any language: `--program \"python3 my_lock.py\"` runs it as \
                  the workers (the worker protocol: docs/worker-protocol.md)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The playground's options, for `fencelab` without a command (as for `fencelab play`).
    #[command(flatten)]
    pub play: PlayOptions,
    #[command(flatten)]
    pub backend: BackendArgs,
}

impl Cli {
    /// Parse the process's arguments, exiting with a usage error (code 2) as clap does.
    pub fn parse_checked() -> Cli {
        Cli::try_parse_checked_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parse `args`, refusing the playground's options before another command
    /// (`fencelab --presenter run`): they would be silently ignored. The backend
    /// options (`--sim`, `--redis`, ...) are global and may come before any command.
    pub fn try_parse_checked_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::parser::ValueSource;
        use clap::{CommandFactory, FromArgMatches};
        let mut cmd = Cli::command();
        let matches = cmd.try_get_matches_from_mut(args)?;
        if let Some((sub, _)) = matches.subcommand() {
            let given = cmd.get_arguments().find(|a| {
                !a.is_global_set()
                    && matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine)
            });
            if let Some(arg) = given {
                let flag = format!("--{}", arg.get_long().unwrap_or(arg.get_id().as_str()));
                let message = format!(
                    "'{flag}' is an option of the playground (`fencelab {flag}` or `fencelab play \
                     {flag}`); it cannot be used with the subcommand '{sub}'"
                );
                return Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, message));
            }
        }
        Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the interactive playground (the default when no command is given).
    Play(PlayArgs),
    /// Run a scenario headless and print what happened, then the checker's verdict.
    Run(RunArgs),
    /// List the built-in scenarios.
    Scenarios,
    /// List the lessons of the course, in order, with what you finished and scored.
    Lessons(LessonsArgs),
    /// Open a lesson (a name from `fencelab lessons`, or a lesson .toml file) in the TUI:
    /// narration beside the timeline, questions along the way, free play at the end.
    /// Without a name: the course's menu, starting where you stopped.
    Lesson(LessonArgs),
    /// Measure things about a real run (see `fencelab bench --help`).
    Bench(BenchArgs),
    /// Search fault schedules (pauses, reply delays, clock jumps, server kills) for one
    /// that breaks a lock design, on the simulator; shrink it to the smallest story,
    /// print it, and confirm it on real servers. Or say exactly what was covered.
    Break(BreakArgs),
    /// List the exercises: write the lock yourself (a starter in Python and one in
    /// Node, written out by `--copy`), then `fencelab check NAME --program ...`.
    Exercises {
        /// Write the starters of exercise NAME (and the worker protocol's page) into
        /// the folder DIR, made if missing; files already there are left alone.
        #[arg(long, num_args = 2, value_names = ["NAME", "DIR"])]
        copy: Option<Vec<String>>,
    },
    /// Check your solution to an exercise: your program as every worker, on real
    /// servers, through the lesson's schedule and then `break`; says what still breaks.
    Check(CheckArgs),
    /// Replay a saved run (`--save FILE`) in the TUI: play, pause, step event by event,
    /// scrub, jump to violations. Needs no Redis.
    Replay(ReplayArgs),
    /// Draw a saved run's timeline as a picture for slides (SVG).
    Export(ExportArgs),
    /// Print a shell completion script (e.g. `fencelab completions bash >
    /// /etc/bash_completion.d/fencelab`).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout (e.g. `fencelab man > fencelab.1`).
    Man,
    /// Open a class: a room on Redis (`--redis URL`, or a private redis-server on the
    /// LAN with a generated password), one join command per student (with a QR code),
    /// then the run once every student has joined. Type `pause NAME`, `resume NAME`,
    /// `crash NAME` or `fencing on|off` while it runs, and Enter to reveal a question.
    Class(ClassArgs),
    /// Join a class with the URL the instructor shows: your worker runs here, as its
    /// own process, and its events go to the room.
    Join {
        /// `redis://fencelab-ROOM-NAME:PASSWORD@HOST:PORT`, from the instructor.
        url: String,
        /// Print the run as lines instead of the full-screen view (also when stdout
        /// is not a terminal); answer a question by typing its number and Enter.
        #[arg(long)]
        headless: bool,
        /// Play your part with your own program, in any language ("CMD ARGS", run here
        /// in the current folder; docs/worker-protocol.md): the instructor's pause
        /// stops it on this machine, and its writes go to the room's storage.
        #[arg(long, value_name = "\"CMD ARGS\"")]
        program: Option<String>,
    },
    /// One worker as its own process: started by `--processes`, which sends its orders
    /// on stdin and reads its events on stdout (JSON lines). Not for typing by hand.
    #[command(hide = true)]
    Worker,
    /// A class room's janitor: started by `fencelab class`, which writes the room on
    /// its stdin; removes the room's users and keys if the class dies unclosed.
    #[command(hide = true)]
    RoomJanitor,
    /// Say which servers fencelab can start here (where each was found, its version),
    /// what is missing and the line that installs it, and which lessons run on real
    /// servers here and which on the simulator.
    Doctor,
}

#[derive(Debug, Clone, Args)]
pub struct ClassArgs {
    /// The scenario the class plays: students take its workers' parts in turn.
    #[arg(default_value = "playground")]
    pub scenario: String,
    /// The students' names, comma-separated (letters, digits, '-', '_').
    #[arg(long, value_delimiter = ',', required = true)]
    pub students: Vec<String>,
    /// Start with fencing tokens checked by the storage.
    #[arg(long)]
    pub fencing: bool,
    /// Without --redis: the address the private redis-server listens on.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub listen: String,
    /// The host name or address students reach this machine by (default: its name).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Text instead of the full-screen view (also when stdout is not a terminal):
    /// join commands printed, the run as lines, controls typed (`pause NAME`, `resume NAME`, `crash NAME`,
    /// `fencing on|off`, Enter to reveal a question).
    #[arg(long)]
    pub headless: bool,
    /// Also serve each student's screen over SSH on PORT (2222 if not given; 0: any
    /// free port), on --listen: students join with `ssh -p PORT NAME@HOST` and the
    /// password shown for them, with nothing installed; their workers run here.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "2222")]
    pub ssh: Option<u16>,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// A file written by `--save` (JSON lines).
    pub file: std::path::PathBuf,
    /// Where to write the SVG.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: std::path::PathBuf,
    /// Which run of the file.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub run: u64,
    /// Draw another run of the file (2 if not given: a lesson's second variant, or
    /// fencing on after off) under `--run`, on the same time axis.
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "2",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub compare: Option<u64>,
    /// Colours for a light slide or a dark one.
    #[arg(long, value_enum, default_value_t = PictureTheme::Light)]
    pub theme: PictureTheme,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PictureTheme {
    Light,
    Dark,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// A file written by `--save` (JSON lines).
    pub file: std::path::PathBuf,
    /// Record the screen to this file (asciicast v2, for `asciinema play`), with the
    /// keys pressed and lesson steps as markers.
    #[arg(long, value_name = "FILE.cast")]
    pub record: Option<std::path::PathBuf>,
    /// Which run of the file (a file can hold several, e.g. fencing off and on).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub run: u64,
    /// Speed factor (`[` and `]` change it).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// High-contrast theme for projectors (toggle with `m`).
    #[arg(long)]
    pub presenter: bool,
}

/// Where the lock and the storage live. Without these flags: private servers started
/// for this run (redis-server, and etcd or PostgreSQL when a scenario asks for them),
/// or, only when a program is not installed, the simulator.
#[derive(Debug, Clone, Default, Args)]
pub struct BackendArgs {
    /// Use this Redis (redis://, rediss://, unix:// URLs; a password in the URL is never shown).
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        hide_env_values = true,
        value_name = "URL",
        conflicts_with = "sim"
    )]
    pub redis: Option<String>,
    /// Use this etcd for etcd scenarios (http://host:port) instead of a private one.
    #[arg(
        long,
        global = true,
        env = "FENCELAB_ETCD_URL",
        hide_env_values = true,
        value_name = "URL",
        conflicts_with = "sim"
    )]
    pub etcd: Option<String>,
    /// Use this PostgreSQL for scenarios whose storage is PostgreSQL (postgres:// URL; a
    /// password in it is never shown). fencelab works in a schema of its own per run.
    #[arg(
        long,
        global = true,
        env = "FENCELAB_POSTGRES_URL",
        hide_env_values = true,
        value_name = "URL",
        conflicts_with = "sim"
    )]
    pub postgres: Option<String>,
    /// Use the built-in simulator (virtual clock, no Redis needed, deterministic).
    #[arg(long, global = true)]
    pub sim: bool,
}

impl BackendArgs {
    pub fn targets(&self) -> crate::backend::deployment::Targets<'_> {
        crate::backend::deployment::Targets {
            redis: self.redis.as_deref(),
            etcd: self.etcd.as_deref(),
            postgres: self.postgres.as_deref(),
            sim: self.sim,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A built-in scenario name (see `fencelab scenarios`) or a path to a scenario .toml file.
    #[arg(default_value = "gc-pause")]
    pub scenario: String,
    /// Whether the storage checks fencing tokens; `both` (the default) runs the
    /// scenario twice. Lessons with variants run their own variants instead.
    #[arg(long, value_enum)]
    pub fencing: Option<Fencing>,
    /// Print the event log as JSON lines instead of the transcript.
    #[arg(long)]
    pub json: bool,
    /// Also write the event log (JSON lines) to this file.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Exit non-zero if the outcome differs from what the scenario expects.
    #[arg(long)]
    pub check: bool,
    /// Speed factor: 0.25 is slow motion (every lease and pause lasts 4x longer in real
    /// time, on Redis too), 2 is double speed. Default: 1, or the scenario file's
    /// `time_scale` (a counterexample saved by `break` replays at the speed it was found).
    #[arg(long, value_parser = parse_speed)]
    pub speed: Option<f64>,
    /// Run each worker as its own process: a pause is the kernel's SIGSTOP, a crash
    /// SIGKILL (real servers only).
    #[arg(long)]
    pub processes: bool,
    /// Run every worker of the scenario as your own program, in any language, driven
    /// through the scenario's steps: "CMD ARGS", split as a shell would and run without
    /// one (in the current folder). Its lines speak the worker protocol:
    /// docs/worker-protocol.md. Real servers only.
    #[arg(long, value_name = "\"CMD ARGS\"")]
    pub program: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The exercise (see `fencelab exercises`).
    pub exercise: String,
    /// Your program: "CMD ARGS", run in the current folder (docs/worker-protocol.md).
    #[arg(long, value_name = "\"CMD ARGS\"")]
    pub program: String,
    /// Real time per scenario time (0.5: twice as fast).
    #[arg(long, value_name = "X", default_value_t = 0.5)]
    pub time_scale: f64,
}

#[derive(Debug, Clone, Args)]
pub struct BreakArgs {
    /// A built-in scenario name or a path to a scenario .toml file: its lock, workers
    /// and fencing are the design; its own pauses and faults of the kinds searched are
    /// taken out.
    pub scenario: String,
    /// The fault kinds to search, comma-separated: pause, delay, clock-jump, kill
    /// (default: pause, delay where the scenario's links can fail, and clock-jump and
    /// kill where the lock has servers to fail).
    #[arg(long, value_name = "LIST")]
    pub faults: Option<String>,
    /// Try at most N schedules (default 10000 on the simulator, 60 when every trial is a
    /// real run; at most a billion).
    #[arg(long, value_name = "N", conflicts_with = "time", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(..=1_000_000_000))]
    pub budget: Option<u64>,
    /// Search for at most S seconds of wall time instead (at most a day).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub time: Option<f64>,
    /// The seed that orders the schedules and draws the random ones.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Write the counterexample as a lesson-format scenario file (its `expect` stated,
    /// so it passes `fencelab run FILE --check`).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Replay the counterexample on real servers (the default, when they are available).
    #[arg(long, overrides_with = "no_confirm")]
    pub confirm: bool,
    /// Do not replay it on real servers.
    #[arg(long, overrides_with = "confirm")]
    pub no_confirm: bool,
    /// Run every trial on real servers instead of the simulator (always so when the
    /// workers are programs): fewer trials, placed at the workers' own moments.
    #[arg(long)]
    pub real: bool,
    /// Break your own program: every worker of the scenario runs it ("CMD ARGS", as
    /// for `run --program`; docs/worker-protocol.md), each trial a real run.
    #[arg(long, value_name = "\"CMD ARGS\"")]
    pub program: Option<String>,
    /// On real servers, real time per scenario time (0.5, the default: leases,
    /// pauses and work take half as long, so trials are twice as fast).
    #[arg(long, value_name = "X")]
    pub time_scale: Option<f64>,
    /// Search the design with the storage checking fencing tokens (on) or not (off);
    /// default: as the scenario says.
    #[arg(long, value_enum)]
    pub fencing: Option<Switch>,
}

/// A setting turned on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn on(self) -> bool {
        self == Switch::On
    }
}

#[derive(Debug, Clone, Args)]
pub struct PlayArgs {
    /// A built-in scenario name or a path to a scenario .toml file.
    #[arg(default_value = "playground")]
    pub scenario: String,
    #[command(flatten)]
    pub options: PlayOptions,
}

/// The playground's options: of `fencelab play`, and of `fencelab` without a command.
#[derive(Debug, Clone, Args)]
pub struct PlayOptions {
    /// Start with fencing tokens checked by the storage (toggle with `f`).
    #[arg(long)]
    pub fencing: bool,
    /// Speed factor (0.25 = slow motion; `[` and `]` change it).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// High-contrast theme for projectors (toggle with `m`).
    #[arg(long)]
    pub presenter: bool,
    /// Run each worker as its own process: a pause is the kernel's SIGSTOP, a crash
    /// SIGKILL (real servers only).
    #[arg(long)]
    pub processes: bool,
    /// Run every worker of the scenario as your own program, in any language, driven
    /// through the scenario's steps: "CMD ARGS", split as a shell would and run without
    /// one (in the current folder). Its lines speak the worker protocol:
    /// docs/worker-protocol.md. Real servers only.
    #[arg(long, value_name = "\"CMD ARGS\"")]
    pub program: Option<String>,
    #[command(flatten)]
    pub keep: Keep,
}

#[derive(Debug, Clone, Args)]
pub struct LessonArgs {
    /// The lesson's name (see `fencelab lessons`) or a path to a lesson .toml file;
    /// none: choose from the course's menu.
    pub lesson: Option<String>,
    /// High-contrast theme for projectors (toggle with `m`). A projector shows the
    /// room, not a learner: the menu shows no scores and nothing is remembered.
    #[arg(long)]
    pub presenter: bool,
    /// Run every worker of the scenario as your own program, in any language, driven
    /// through the scenario's steps: "CMD ARGS", split as a shell would and run without
    /// one (in the current folder). Its lines speak the worker protocol:
    /// docs/worker-protocol.md. Real servers only.
    #[arg(long, value_name = "\"CMD ARGS\"")]
    pub program: Option<String>,
    #[command(flatten)]
    pub keep: Keep,
}

/// What a TUI session keeps: its event log and a recording of its screen.
#[derive(Debug, Clone, Default, Args)]
pub struct Keep {
    /// Save every run of the session to this file (JSON lines), for `fencelab replay`.
    #[arg(long, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
    /// Record the screen to this file (asciicast v2, for `asciinema play`), with the
    /// keys pressed and lesson steps as markers.
    #[arg(long, value_name = "FILE.cast")]
    pub record: Option<std::path::PathBuf>,
}

/// `fencelab lessons`: the list, and what is remembered of you.
#[derive(Debug, Clone, Default, Args)]
pub struct LessonsArgs {
    /// Forget the lessons finished and the scores kept on this machine.
    #[arg(long)]
    pub reset_progress: bool,
    /// List without your scores (a shared screen, a projector).
    #[arg(long)]
    pub hide_scores: bool,
}

impl LessonArgs {
    /// The playground's arguments for the lesson called `lesson`: a lesson is the
    /// playground with narration, at the lesson's own speed.
    pub fn play(&self, lesson: &str) -> PlayArgs {
        PlayArgs {
            scenario: lesson.to_string(),
            options: PlayOptions {
                presenter: self.presenter,
                keep: self.keep.clone(),
                program: self.program.clone(),
                ..PlayOptions::default()
            },
        }
    }
}

impl Default for PlayArgs {
    fn default() -> Self {
        PlayArgs { scenario: "playground".into(), options: PlayOptions::default() }
    }
}

impl Default for PlayOptions {
    fn default() -> Self {
        PlayOptions {
            fencing: false,
            speed: 1.0,
            presenter: false,
            processes: false,
            program: None,
            keep: Keep::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fencing {
    On,
    Off,
    Both,
}

impl Fencing {
    /// The fencing modes to run, in order.
    pub fn modes(self) -> Vec<bool> {
        match self {
            Fencing::On => vec![true],
            Fencing::Off => vec![false],
            Fencing::Both => vec![false, true],
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Debug, Clone, Subcommand)]
pub enum BenchWhat {
    /// How soon after A's lease expires does the waiting B get the lock? (gc-pause,
    /// fencing off, repeated; reports the median.)
    Handover {
        /// How many runs.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        runs: u32,
    },
    /// A class on loopback: N students (the real desk code, scripted) post events to
    /// one room; reports events per second, the latency from a post to the
    /// instructor's read (median, p99), whether any event was lost, and the time to
    /// draw a frame of the run with a lane per student.
    Class {
        /// How many students.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=2000))]
        students: u32,
        /// How many events each student posts (a run takes at most 5000 from one).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        events: u32,
        /// Milliseconds between two posts of one student.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=60_000))]
        pace_ms: u32,
        /// Instead: the students join over SSH (their screens drawn by this process),
        /// beside `fencelab join`, each playing a run of this many seconds.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "6",
              value_parser = clap::value_parser!(u32).range(1..=600))]
        ssh: Option<u32>,
    },
    /// How many gc-pause-sized runs a second a search can try: gc-pause with a random
    /// pause fault, run and checked, on the stepper and on the simulator (one runtime
    /// reused, and one per run), two threads each; time per run (median, p90, p99).
    Sim {
        /// How many runs on the stepper.
        #[arg(long, default_value_t = 400_000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
        runs: u32,
        /// How many runs on each of the simulator's paths (each is about 50x slower), and
        /// on each kind of lock's.
        #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
        engine_runs: u32,
    },
    /// What `fencelab break` costs on real servers: the same search (gc-pause, or an
    /// example's scenario, fencing off) with a program as the workers (redis-py's
    /// example, or the scenario's own), with fencelab's own workers on the real servers,
    /// and on the stepper; trials per second, time per trial, to the first
    /// counterexample and per search, shrunk and shown (median, p90, p99).
    Break {
        /// How many searches per path.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
        searches: u32,
        /// The design searched: a built-in scenario or a scenario file (an example's:
        /// `examples/python-kazoo/pause.toml`), with fencing off.
        #[arg(long, value_name = "SCENARIO", default_value = "gc-pause")]
        scenario: String,
        /// The program ("CMD ARGS", run in the current folder). Default: the
        /// scenario's own, or redis-py's example where it names none (on one Redis).
        #[arg(long, value_name = "\"CMD ARGS\"")]
        program: Option<String>,
        /// Real time per scenario time on real servers.
        #[arg(long, value_name = "X", default_value_t = 0.25)]
        time_scale: f64,
    },
    /// How long each kind of private server takes to start and answer (median).
    Servers {
        /// How many starts.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        runs: u32,
    },
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number; try 0.5 or 2"))?;
    crate::scenario::bounds::check_speed(v)
}
