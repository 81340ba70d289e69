//! The simulator's models, on tokio's clock: a Redis (keys, deadlines, the lock and
//! storage commands, the SQL tables of the lessons without a lock, a stream with its
//! consumer group), the servers of Redlock and of a failover pair, an etcd and a
//! ZooKeeper. Each is a model, not a mock: the differential test runs every lesson on
//! it and on real servers and compares.

mod advisory;
mod etcd;
mod link;
mod nodes;
mod pubsub;
mod redis;
mod stream;
mod zookeeper;

pub use advisory::SimPostgres;
pub use etcd::SimEtcd;
pub use nodes::{SimNodes, SimPair};
pub use redis::{SimBackend, SimClient, SimStorageClient};
pub use zookeeper::SimZooKeeper;
