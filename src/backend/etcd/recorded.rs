//! The etcd requests a lock client makes, written down as it makes them, for the
//! commands inspector: [`Recorded`] wraps any [`LeaseKv`] (a real etcd's JSON gateway
//! or the simulator's model), so both say the same words, named after the gateway's
//! paths (`POST /v3/kv/txn ...`), compact: the run's id in a key is `{…}`, a lock
//! value's random part and a lease id are cut to their first or last few digits.

use std::time::Duration;

use tokio::time::Instant;

use super::{KeyState, LeaseKv};
use crate::backend::BackendError;

/// One request as the inspector shows it and its answer, with how long it took.
pub type Sent = ((String, String), Duration);

/// A [`LeaseKv`] that notes every request it passes on, until [`Recorded::take_sent`].
pub struct Recorded<K> {
    kv: K,
    sent: Vec<Sent>,
    /// How a key's value is shown (a lock value, or a Lease record's fields).
    value: fn(&str) -> String,
}

impl<K: LeaseKv> Recorded<K> {
    pub fn new(kv: K) -> Self {
        Recorded { kv, sent: Vec::new(), value: short_value }
    }

    /// The same, showing a key's value with `value` (a record's fields, say).
    pub fn showing(self, value: fn(&str) -> String) -> Self {
        Recorded { value, ..self }
    }

    /// The requests made since the last take.
    pub fn take_sent(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.sent)
    }

    /// Note `request` and its answer (`answer` of the result, or how it failed).
    fn note<T>(
        &mut self,
        started: Instant,
        request: String,
        result: &Result<T, BackendError>,
        answer: impl FnOnce(&T) -> String,
    ) {
        let answer = match result {
            Ok(t) => answer(t),
            Err(BackendError::Lost { .. }) => "(no answer: connection lost)".to_string(),
            Err(e) => format!("(failed: {e})"),
        };
        self.sent.push(((request, answer), started.elapsed()));
    }
}

/// `fencelab:{…}:lock`: the run's id, which every key of the run shares, left out.
pub fn short_key(key: &str) -> String {
    match (key.find('{'), key.find('}')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{{…}}{}", &key[..open], &key[close + 1..])
        }
        _ => key.to_string(),
    }
}

/// `A:9f3c…`: a lock value's worker and the start of its random part.
pub fn short_value(value: &str) -> String {
    match value.split_once(':') {
        Some((worker, random)) if random.chars().count() > 4 => {
            format!("{worker}:{}…", random.chars().take(4).collect::<String>())
        }
        _ => value.to_string(),
    }
}

/// A lease id in hex, as `etcdctl` prints it, cut to its last 4 digits (a real etcd's
/// ids share their leading digits, the member's).
pub fn short_lease(lease: i64) -> String {
    let hex = format!("{lease:x}");
    match hex.len() {
        0..=6 => hex,
        n => format!("…{}", &hex[n - 4..]),
    }
}

fn lease_part(lease: i64) -> String {
    if lease == 0 { String::new() } else { format!(" lease {}", short_lease(lease)) }
}

impl<K: LeaseKv> LeaseKv for Recorded<K> {
    const WHOLE_SECONDS: bool = K::WHOLE_SECONDS;

    async fn grant(&mut self, ttl_s: i64) -> Result<i64, BackendError> {
        let started = Instant::now();
        let result = self.kv.grant(ttl_s).await;
        let request = format!("POST /v3/lease/grant TTL {ttl_s}");
        self.note(started, request, &result, |id| format!("ID {}", short_lease(*id)));
        result
    }

    async fn put_if(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
        mod_revision: i64,
    ) -> Result<Option<i64>, BackendError> {
        let started = Instant::now();
        let result = self.kv.put_if(key, value, lease, mod_revision).await;
        // In etcd's words (a compare's target `MOD`), and short enough for the answer
        // to show on a narrow screen: the key (the run's lock, named by every read) and
        // the lease (granted by the request just before) are left out.
        let request = format!("POST /v3/kv/txn if MOD={mod_revision} put {}", (self.value)(value));
        self.note(started, request, &result, |put| match put {
            Some(revision) => format!("revision {revision}"),
            None => "failed".to_string(),
        });
        result
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) -> Result<i64, BackendError> {
        let started = Instant::now();
        let result = self.kv.put(key, value, lease).await;
        let request = format!(
            "POST /v3/kv/put {} {}{}",
            short_key(key),
            (self.value)(value),
            lease_part(lease)
        );
        self.note(started, request, &result, |revision| format!("revision {revision}"));
        result
    }

    async fn get(&mut self, key: &str) -> Result<Option<KeyState>, BackendError> {
        let started = Instant::now();
        let result = self.kv.get(key).await;
        let request = format!("POST /v3/kv/range {}", short_key(key));
        let value = self.value;
        self.note(started, request, &result, |state| match state {
            Some(k) if k.lease == 0 => format!("{} (MOD {})", value(&k.value), k.mod_revision),
            Some(k) => format!(
                "{} (MOD {}, lease {})",
                value(&k.value),
                k.mod_revision,
                short_lease(k.lease)
            ),
            None => "(no key)".to_string(),
        });
        result
    }

    async fn delete(&mut self, key: &str, if_value: Option<&str>) -> Result<bool, BackendError> {
        let started = Instant::now();
        let result = self.kv.delete(key, if_value).await;
        let request = match if_value {
            Some(v) => {
                format!("POST /v3/kv/txn if VALUE={} delete {}", (self.value)(v), short_key(key))
            }
            None => format!("POST /v3/kv/deleterange {}", short_key(key)),
        };
        let txn = if_value.is_some();
        self.note(started, request, &result, |deleted| match (txn, deleted) {
            (true, true) => "succeeded".to_string(),
            (true, false) => "failed (not that value)".to_string(),
            (false, deleted) => format!("deleted {}", u8::from(*deleted)),
        });
        result
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, BackendError> {
        let started = Instant::now();
        let result = self.kv.keep_alive(lease).await;
        let request = format!("POST /v3/lease/keepalive ID {}", short_lease(lease));
        self.note(started, request, &result, |alive| {
            if *alive { "TTL renewed" } else { "TTL 0 (the lease is gone)" }.to_string()
        });
        result
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), BackendError> {
        let started = Instant::now();
        let result = self.kv.revoke(lease).await;
        let request = format!("POST /v3/lease/revoke ID {}", short_lease(lease));
        self.note(started, request, &result, |()| "revoked".to_string());
        result
    }

    async fn time_to_live_ms(&mut self, lease: i64) -> Result<Option<u64>, BackendError> {
        let started = Instant::now();
        let result = self.kv.time_to_live_ms(lease).await;
        let request = format!("POST /v3/lease/timetolive ID {}", short_lease(lease));
        self.note(started, request, &result, |ttl| match ttl {
            Some(ms) => format!("TTL {ms} ms"),
            None => "TTL -1 (no such lease)".to_string(),
        });
        result
    }

    async fn revision(&mut self) -> Result<i64, BackendError> {
        let started = Instant::now();
        let result = self.kv.revision().await;
        let request = "POST /v3/kv/range fencelab: (the header's revision)".to_string();
        self.note(started, request, &result, |revision| format!("revision {revision}"));
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_and_leases_are_shortened() {
        assert_eq!(short_key("fencelab:{3fa1c2d0}:lock"), "fencelab:{…}:lock");
        assert_eq!(short_key("plain"), "plain");
        assert_eq!(short_value("A:9f3c8e2b1a0d4c5f"), "A:9f3c…");
        assert_eq!(short_value("A:1"), "A:1");
        assert_eq!(short_lease(3), "3");
        assert_eq!(short_lease(0x694d_7c8f_3e2a_1b05), "…1b05");
    }
}
