//! The ranges a scenario's numbers must fall in, checked while the TOML is read, so a
//! value out of range is an error at its own line and column, and what passes on the
//! simulator also runs on a real server (Redis takes `PX` up to 2^63 ms, but an hour
//! of scenario time is more than any lesson needs, and nothing runs forever).

use serde::{Deserialize, Deserializer, de::Error};

/// Every duration in a scenario (`ttl_ms`, `start_ms`, `pause`/`work` `ms`,
/// `give_up_ms`, fault and checkpoint `at_ms`, `timeout_ms`, sweep leases and pauses):
/// at most one hour of scenario time.
pub const MAX_MS: u64 = 3_600_000;

/// The speed factor, in a file (`speed = 0.5`) as on the command line (`--speed`).
pub const SPEED: std::ops::RangeInclusive<f64> = 0.05..=20.0;

/// Workers in one scenario: one lane each, named A to Z at most.
pub const MAX_WORKERS: usize = 26;

/// Steps in one worker's script.
pub const MAX_STEPS: usize = 1000;

/// `[sweep] runs`: simulated runs per lease length.
pub const MAX_SWEEP_RUNS: u32 = 10_000;

/// `[sweep] lease_ms`: lease lengths compared.
pub const MAX_SWEEP_LEASES: usize = 16;

/// `[sweep] redis_sample`: runs per lease length repeated on real servers, all at once.
pub const MAX_REDIS_SAMPLE: u32 = 20;

/// A question's choices: one number key each, 1 to 9 (the TUI's and a class's).
pub const MAX_CHOICES: usize = 9;

/// Worker names: short, so they fit a lane label, and plain, so they are safe to print.
pub const MAX_NAME: usize = 12;

/// Whether `speed` is a speed fencelab runs at; the message says the allowed range.
pub fn check_speed(v: f64) -> Result<f64, String> {
    if SPEED.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "speed {v} is out of range; use {} (very slow) to {} (very fast)",
            SPEED.start(),
            SPEED.end()
        ))
    }
}

fn check_ms<E: Error>(v: u64) -> Result<u64, E> {
    if v <= MAX_MS {
        Ok(v)
    } else {
        Err(E::custom(format!(
            "{v} ms is out of range: durations are 0 to {MAX_MS} ms (one hour of scenario time)"
        )))
    }
}

/// A duration in scenario milliseconds, 0 to [`MAX_MS`].
pub fn ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    check_ms(u64::deserialize(d)?)
}

/// An optional duration, 0 to [`MAX_MS`].
pub fn opt_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<u64>::deserialize(d)?.map(check_ms).transpose()
}

/// `time_scale = X`: real time per scenario time, the inverse of a speed in [`SPEED`].
pub fn opt_time_scale<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let scale = Option::<f64>::deserialize(d)?;
    scale
        .map(|v| {
            let speed = if v > 0.0 { 1.0 / v } else { f64::NAN };
            check_speed(speed).map(|_| v).map_err(|_| {
                D::Error::custom(format!(
                    "time_scale {v} is out of range; use {} to {} (real time per scenario time)",
                    1.0 / SPEED.end(),
                    1.0 / SPEED.start()
                ))
            })
        })
        .transpose()
}

/// `speed = X`: finite, in [`SPEED`].
pub fn opt_speed<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d)?.map(|v| check_speed(v).map_err(D::Error::custom)).transpose()
}

/// `redlock_nodes = N`: 1 to 9 servers.
pub fn opt_nodes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let nodes = Option::<usize>::deserialize(d)?;
    match nodes {
        Some(n) if !(1..=9).contains(&n) => {
            Err(D::Error::custom(format!("redlock_nodes = {n}: expected 1 to 9 servers")))
        }
        _ => Ok(nodes),
    }
}

/// `[sweep] runs`: 1 to [`MAX_SWEEP_RUNS`].
pub fn sweep_runs<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let runs = u32::deserialize(d)?;
    if (1..=MAX_SWEEP_RUNS).contains(&runs) {
        Ok(runs)
    } else {
        Err(D::Error::custom(format!("runs = {runs}: expected 1 to {MAX_SWEEP_RUNS}")))
    }
}

/// `[sweep] redis_sample`: 0 to [`MAX_REDIS_SAMPLE`].
pub fn redis_sample<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = u32::deserialize(d)?;
    if n <= MAX_REDIS_SAMPLE {
        Ok(n)
    } else {
        Err(D::Error::custom(format!("redis_sample = {n}: expected 0 to {MAX_REDIS_SAMPLE}")))
    }
}

/// `[sweep] lease_ms`: 1 to [`MAX_SWEEP_LEASES`] durations.
pub fn lease_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    let leases = Vec::<u64>::deserialize(d)?;
    if !(1..=MAX_SWEEP_LEASES).contains(&leases.len()) {
        return Err(D::Error::custom(format!(
            "lease_ms has {} lease lengths: expected 1 to {MAX_SWEEP_LEASES}",
            leases.len()
        )));
    }
    leases.into_iter().map(check_ms).collect()
}

/// A worker's name: 1 to [`MAX_NAME`] letters, digits, `-` or `_` (so it is safe to
/// print anywhere and fits a lane label).
pub fn worker_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(name)
    } else {
        // Debug formatting escapes control characters: none reaches the terminal.
        let shown: String = name.chars().take(40).collect();
        let more = if name.chars().count() > 40 { "..." } else { "" };
        Err(D::Error::custom(format!(
            "worker name {shown:?}{more}: expected 1 to {MAX_NAME} letters, digits, '-' or '_'"
        )))
    }
}

/// A worker's steps: at most [`MAX_STEPS`].
pub fn steps<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let steps = Vec::<T>::deserialize(d)?;
    if steps.len() <= MAX_STEPS {
        Ok(steps)
    } else {
        Err(D::Error::custom(format!("{} steps: a worker has at most {MAX_STEPS}", steps.len())))
    }
}

/// `clock_rate`: from a clock at a quarter of true speed to one eight times too fast.
pub const CLOCK_RATE: std::ops::RangeInclusive<f64> = 0.25..=8.0;

/// A clock that keeps true time: what `clock_rate` is when not set.
pub fn true_rate() -> f64 {
    1.0
}

pub fn is_true_rate(rate: &f64) -> bool {
    *rate == 1.0
}

/// `clock_rate = X`: finite, in [`CLOCK_RATE`].
pub fn clock_rate<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if CLOCK_RATE.contains(&v) {
        Ok(v)
    } else {
        Err(D::Error::custom(format!(
            "clock_rate = {v} is out of range; use {} (a clock at a quarter of true speed) to {} (eight times too fast)",
            CLOCK_RATE.start(),
            CLOCK_RATE.end()
        )))
    }
}

/// A program's argv: a program name and at most a few dozen arguments, none empty.
pub fn argv<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let argv = Vec::<String>::deserialize(d)?;
    match argv.first() {
        None => {
            Err(D::Error::custom("a program is a non-empty list: [\"python3\", \"my_lock.py\"]"))
        }
        Some(_) if argv.len() > 64 => Err(D::Error::custom("a program has at most 64 arguments")),
        Some(_) if argv.iter().any(|a| a.is_empty() || a.contains('\0')) => {
            Err(D::Error::custom("a program's arguments must be non-empty text"))
        }
        Some(_) => Ok(argv),
    }
}
