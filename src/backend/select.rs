//! Choosing where a run happens: the user's Redis, a private one, or the simulator.

use super::BackendError;
use super::redis::RedisBackend;
use super::server::{PrivateRedis, ServerError};
use super::sim::SimBackend;

/// The backend chosen for this program run. A private server lives inside it and
/// stops when it is dropped.
// There is one value of this per program run, so the size difference is irrelevant.
#[allow(clippy::large_enum_variant)]
pub enum Chosen {
    Redis { backend: RedisBackend, _server: Option<PrivateRedis> },
    Sim { backend: SimBackend, why: SimReason },
}

/// Why the simulator runs: asked for, or the only thing available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimReason {
    Requested,
    NoRedisServer,
}

impl Chosen {
    /// One line for the header: which backend, with passwords redacted.
    pub fn describe(&self) -> String {
        use super::Backend;
        match self {
            Chosen::Redis { backend, .. } => backend.describe(),
            Chosen::Sim { backend, .. } => backend.describe(),
        }
    }

    /// A warning to print when the simulator runs only because Redis is missing.
    pub fn fallback_notice(&self) -> Option<String> {
        match self {
            Chosen::Sim { why: SimReason::NoRedisServer, .. } => Some(format!(
                "note: redis-server is not installed, so this run uses the built-in SIMULATOR. \
                 For a real Redis: {} (or pass --redis URL).",
                super::server::INSTALL_HINT
            )),
            _ => None,
        }
    }
}

/// Pick the backend: `--sim`; else `--redis URL` / `REDIS_URL`; else a private
/// `redis-server`; else, only when none is installed, the simulator.
pub fn choose(redis_url: Option<&str>, sim: bool) -> Result<Chosen, SelectError> {
    if sim {
        return Ok(Chosen::Sim { backend: SimBackend::default(), why: SimReason::Requested });
    }
    if let Some(url) = redis_url {
        return Ok(Chosen::Redis { backend: RedisBackend::open(url, "Redis")?, _server: None });
    }
    match PrivateRedis::start() {
        Ok(server) => {
            let backend = RedisBackend::open(&server.url(), "private redis-server")?;
            Ok(Chosen::Redis { backend, _server: Some(server) })
        }
        Err(ServerError::NotInstalled) => {
            Ok(Chosen::Sim { backend: SimBackend::default(), why: SimReason::NoRedisServer })
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Server(#[from] ServerError),
}
