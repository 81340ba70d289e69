//! Lock services: each algorithm written once, over whatever servers it runs on (real
//! ones in `server/`, the simulator's in `sim/`).

pub mod advisory;
pub mod etcd;
pub mod failover;
pub mod k8s_lease;
pub mod pgboss;
pub mod redis;
pub mod redlock;
pub mod stream;
pub mod zookeeper;
