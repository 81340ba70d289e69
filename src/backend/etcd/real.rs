//! The lock's etcd calls on a real etcd, through the `etcd-client` gRPC client.

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::{EtcdCluster, KeyState, LeaseKv};
use crate::backend::BackendError;

/// An etcd reachable at `endpoint` (`http://127.0.0.1:PORT`).
pub struct RealEtcd {
    endpoint: String,
    label: String,
    /// Said after the endpoint in the header (where the storage is).
    note: Option<String>,
}

impl RealEtcd {
    pub fn new(endpoint: &str, label: &str) -> Self {
        RealEtcd { endpoint: endpoint.to_string(), label: label.to_string(), note: None }
    }

    pub fn with_note(self, note: &str) -> Self {
        RealEtcd { note: Some(note.to_string()), ..self }
    }
}

fn lost(e: etcd_client::Error) -> BackendError {
    BackendError::Service { service: "etcd", message: e.to_string() }
}

/// A put attached to `lease` (0: no lease, the key never expires).
fn put_options(lease: i64) -> Option<PutOptions> {
    (lease != 0).then(|| PutOptions::new().with_lease(lease))
}

fn revision_of(header: Option<&etcd_client::ResponseHeader>) -> Result<i64, BackendError> {
    header.map(|h| h.revision()).ok_or_else(|| BackendError::Service {
        service: "etcd",
        message: "no response header".into(),
    })
}

impl EtcdCluster for RealEtcd {
    type Kv = Client;

    async fn connect(&self) -> Result<Client, BackendError> {
        Client::connect([self.endpoint.as_str()], None).await.map_err(|e| {
            let (url, reason) = (self.endpoint.clone(), e.to_string());
            BackendError::ServiceUnreachable { service: "etcd", url, reason }
        })
    }

    fn describe(&self) -> String {
        let note = self.note.as_ref().map_or(String::new(), |n| format!(", {n}"));
        format!("{} (etcd lease lock) at {}{note}", self.label, self.endpoint)
    }
}

impl LeaseKv for Client {
    async fn grant(&mut self, ttl_s: i64) -> Result<i64, BackendError> {
        Ok(self.lease_grant(ttl_s, None).await.map_err(lost)?.id())
    }

    async fn create(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
    ) -> Result<Option<i64>, BackendError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, put_options(lease))]);
        let reply = self.txn(txn).await.map_err(lost)?;
        if !reply.succeeded() {
            return Ok(None);
        }
        revision_of(reply.header()).map(Some)
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) -> Result<i64, BackendError> {
        let reply = Client::put(self, key, value, put_options(lease)).await.map_err(lost)?;
        revision_of(reply.header())
    }

    async fn get(&mut self, key: &str) -> Result<Option<KeyState>, BackendError> {
        let reply = Client::get(self, key, None).await.map_err(lost)?;
        let Some(kv) = reply.kvs().first() else { return Ok(None) };
        let value = kv.value_str().map_err(lost)?;
        Ok(Some(KeyState {
            value: value.to_string(),
            mod_revision: kv.mod_revision(),
            lease: kv.lease(),
        }))
    }

    async fn delete(&mut self, key: &str, if_value: Option<&str>) -> Result<bool, BackendError> {
        let Some(value) = if_value else {
            return Ok(Client::delete(self, key, None).await.map_err(lost)?.deleted() > 0);
        };
        let txn = Txn::new()
            .when([Compare::value(key, CompareOp::Equal, value)])
            .and_then([TxnOp::delete(key, None)]);
        Ok(self.txn(txn).await.map_err(lost)?.succeeded())
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, BackendError> {
        // The client sends one keep-alive when it opens the stream and reports a lease
        // that is gone as an error.
        match self.lease_keep_alive(lease).await {
            Ok(_) => Ok(true),
            Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
            Err(e) => Err(lost(e)),
        }
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), BackendError> {
        match self.lease_revoke(lease).await {
            // Already expired: nothing to revoke.
            Ok(_) => Ok(()),
            Err(etcd_client::Error::GRpcStatus(s)) if s.message().contains("not found") => Ok(()),
            Err(e) => Err(lost(e)),
        }
    }

    async fn time_to_live_ms(&mut self, lease: i64) -> Result<Option<u64>, BackendError> {
        let ttl = self.lease_time_to_live(lease, None).await.map_err(lost)?.ttl();
        Ok(u64::try_from(ttl).ok().map(|s| s * 1000))
    }

    async fn revision(&mut self) -> Result<i64, BackendError> {
        let reply = Client::get(self, "fencelab:", None).await.map_err(lost)?;
        revision_of(reply.header())
    }
}
