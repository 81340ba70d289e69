//! Where a foreign program (docs/worker-protocol.md) reaches a deployment's servers: each
//! server's kind, where its proxy dials, the address the program is given (the proxy's
//! own put in), and its password, which only the hello line carries.
//!
//! A program always dials TCP on loopback, through a proxy of its own per server (the
//! proxy carries its link faults, shows the inspector its calls, and holds a reply
//! where `break` pauses it), even to a server on a unix socket.

use redis::ConnectionAddr;

use super::BackendError;
use super::proxy::Upstream;

/// What kind of server it is: which of the hello line's `servers` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Redis,
    Etcd,
    ZooKeeper,
    Postgres,
}

/// One server a program may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramServer {
    pub kind: ServerKind,
    /// Where its proxy dials.
    pub upstream: Upstream,
    /// The address the program is given, `{addr}` standing for its proxy's
    /// `127.0.0.1:PORT`: `redis://{addr}/0`, `http://{addr}`, `{addr}`,
    /// `postgresql://fencelab@{addr}/postgres?sslmode=disable`. Never a password.
    pub template: String,
    pub password: Option<String>,
}

impl ProgramServer {
    /// The address the program is given for a proxy listening at `addr`.
    pub fn address(&self, addr: std::net::SocketAddr) -> String {
        self.template.replace("{addr}", &addr.to_string())
    }

    /// A Redis, from the URL fencelab's own clients use (password and all: the
    /// password is kept apart, the URL the program gets has none).
    pub fn redis(raw: &str) -> Result<Self, BackendError> {
        let unsupported = |why: &str| BackendError::Unsupported(format!("a program's Redis {why}"));
        // The redis crate reads it exactly as the run's own clients do.
        let info = redis::IntoConnectionInfo::into_connection_info(raw)
            .map_err(|_| unsupported("has a URL fencelab cannot read"))?;
        let (upstream, scheme) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                (Upstream::Tcp { host: host.clone(), port: *port }, "redis")
            }
            ConnectionAddr::TcpTls { host, port, .. } => {
                (Upstream::Tcp { host: host.clone(), port: *port }, "rediss")
            }
            ConnectionAddr::Unix(path) => (Upstream::Unix(path.clone()), "redis"),
            _ => return Err(unsupported("is reached in a way fencelab cannot proxy")),
        };
        let settings = info.redis_settings();
        let user = settings.username().map_or(String::new(), |u| format!("{u}@"));
        Ok(ProgramServer {
            kind: ServerKind::Redis,
            upstream,
            template: format!("{scheme}://{user}{{addr}}/{}", settings.db()),
            password: settings.password().map(str::to_string),
        })
    }

    /// An etcd at `endpoint` (`http://host:port`): its gRPC API and its JSON gateway
    /// share the one port.
    pub fn etcd(endpoint: &str) -> Result<Self, BackendError> {
        let url = url::Url::parse(endpoint).map_err(|_| {
            BackendError::Unsupported(format!("a program's etcd at {endpoint:?}: not a URL"))
        })?;
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(BackendError::Unsupported(format!(
                "a program's etcd at {endpoint:?}: no host and port"
            )));
        };
        let upstream = Upstream::Tcp { host: host.to_string(), port };
        Ok(ProgramServer {
            kind: ServerKind::Etcd,
            upstream,
            template: "http://{addr}".into(),
            password: None,
        })
    }

    /// A ZooKeeper at `host:port`; the program gets its connect string.
    pub fn zookeeper(address: &str) -> Result<Self, BackendError> {
        let parsed = address.rsplit_once(':').and_then(|(h, p)| Some((h, p.parse().ok()?)));
        let Some((host, port)) = parsed else {
            return Err(BackendError::Unsupported(format!(
                "a program's ZooKeeper at {address:?}: expected host:port"
            )));
        };
        let upstream = Upstream::Tcp { host: host.to_string(), port };
        Ok(ProgramServer {
            kind: ServerKind::ZooKeeper,
            upstream,
            template: "{addr}".into(),
            password: None,
        })
    }

    /// A PostgreSQL at `upstream`, as `user` on `dbname`. Without TLS (`sslmode=disable`):
    /// the proxy must read the conversation for the inspector, and a private server
    /// has no certificate anyway.
    pub fn postgres(
        upstream: Upstream,
        user: &str,
        dbname: &str,
        password: Option<String>,
    ) -> Self {
        ProgramServer {
            kind: ServerKind::Postgres,
            upstream,
            template: format!("postgresql://{user}@{{addr}}/{dbname}?sslmode=disable"),
            password,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_keeps_its_user_and_database_and_gives_no_password_away() {
        let s = ProgramServer::redis("redis://alice:sekrit@10.0.0.5:6380/3").unwrap();
        assert_eq!(s.upstream, Upstream::Tcp { host: "10.0.0.5".into(), port: 6380 });
        let addr: std::net::SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(s.address(addr), "redis://alice@127.0.0.1:4000/3");
        assert_eq!(s.password.as_deref(), Some("sekrit"));
        let unix = ProgramServer::redis("redis+unix:///tmp/r/redis.sock").unwrap();
        assert_eq!(unix.upstream, Upstream::Unix("/tmp/r/redis.sock".into()));
        assert_eq!(unix.address(addr), "redis://127.0.0.1:4000/0");
    }

    #[test]
    fn etcd_zookeeper_and_postgres_addresses_are_the_proxys() {
        let addr: std::net::SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let etcd = ProgramServer::etcd("http://127.0.0.1:2379").unwrap();
        assert_eq!(etcd.upstream, Upstream::Tcp { host: "127.0.0.1".into(), port: 2379 });
        assert_eq!(etcd.address(addr), "http://127.0.0.1:4000");
        let zk = ProgramServer::zookeeper("127.0.0.1:2181").unwrap();
        assert_eq!(zk.address(addr), "127.0.0.1:4000");
        assert!(ProgramServer::zookeeper("nowhere").is_err());
        let pg = ProgramServer::postgres(
            Upstream::Unix("/tmp/pg/.s.PGSQL.5432".into()),
            "fencelab",
            "postgres",
            None,
        );
        assert_eq!(
            pg.address(addr),
            "postgresql://fencelab@127.0.0.1:4000/postgres?sslmode=disable"
        );
    }
}
