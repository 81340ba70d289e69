//! The lock's etcd calls on a real etcd, through etcd's own JSON gateway.
//!
//! Every gRPC call etcd serves is also served as `POST /v3/<service>/<call>` on its
//! client port, with the request and the answer as JSON: keys and values in base64,
//! 64-bit integers as strings, and fields at their zero value left out of answers
//! (`succeeded: false` and `deleted: 0` arrive as nothing at all). A gRPC client
//! would need `protoc` at build time; this needs only an HTTP/1.1 client, so every
//! build of fencelab runs etcd lessons on a real etcd.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::{EtcdCluster, KeyState, LeaseKv};
use crate::backend::proxy::Upstream;
use crate::backend::redis::redact_url;
use crate::backend::{BackendError, WorkerLink};

/// How long one call may take, connecting included. A private etcd answers in about a
/// millisecond; an etcd that has said nothing for this long is not going to, and a run
/// must stop with an error rather than hang on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// gRPC's NOT_FOUND, which etcd gives for a lease that is already gone.
const NOT_FOUND: i64 = 5;

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

impl EtcdCluster for RealEtcd {
    type Kv = EtcdHttp;

    /// No network yet: the first call connects (and a client reconnects by itself
    /// after etcd closes an idle connection). Through a link, the client's requests
    /// go to the link's proxy for this etcd.
    async fn connect(&self, link: Option<&WorkerLink>) -> Result<EtcdHttp, BackendError> {
        EtcdHttp::new(&self.endpoint, link).await
    }

    fn program_server(&self) -> Option<Result<crate::backend::ProgramServer, BackendError>> {
        Some(crate::backend::ProgramServer::etcd(&self.endpoint))
    }

    fn describe(&self) -> String {
        let note = self.note.as_ref().map_or(String::new(), |n| format!(", {n}"));
        let shown = origin(&self.endpoint).unwrap_or_else(|_| redact_url(&self.endpoint));
        format!("{} (etcd lease lock) at {shown}{note}", self.label)
    }
}

/// One client's connection to etcd's JSON gateway.
pub struct EtcdHttp {
    client: Client<HttpConnector, Full<Bytes>>,
    /// `http://host:port`, the etcd every call is for and what errors name.
    origin: String,
    /// Where every call is sent: `origin`, or the worker's proxy to it.
    target: String,
    /// The worker's link, and how many of its cuts this client has started afresh
    /// after (a cut closed every connection in the client's pool).
    link: Option<(WorkerLink, u64)>,
}

/// etcd's own refusal of a request: its gRPC status code and message.
struct Refusal {
    code: i64,
    message: String,
}

/// An HTTP/1.1 client with a pool of its own.
fn http_client() -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    // A call is one small request and one small answer: no waiting to fill packets.
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

impl EtcdHttp {
    async fn new(endpoint: &str, link: Option<&WorkerLink>) -> Result<Self, BackendError> {
        let unreachable = |reason| BackendError::ServiceUnreachable {
            service: "etcd",
            url: redact_url(endpoint),
            reason,
        };
        let origin = origin(endpoint).map_err(unreachable)?;
        let target = match link {
            None => origin.clone(),
            Some(link) => {
                let url = url::Url::parse(&origin).map_err(|e| unreachable(e.to_string()))?;
                let host = url.host_str().unwrap_or("localhost").to_string();
                let port = url.port_or_known_default().unwrap_or(80);
                let proxy = link
                    .dial(Upstream::Tcp { host, port })
                    .await
                    .map_err(|e| unreachable(format!("could not start the link's proxy: {e}")))?;
                format!("http://{proxy}")
            }
        };
        let link = link.map(|link| (link.clone(), link.cuts()));
        Ok(EtcdHttp { client: http_client(), origin, target, link })
    }

    /// Before a call over a link: fail at once while it is cut (as a request to a host
    /// whose route is gone does), and start with a fresh pool after each cut, as a
    /// client that saw its connections drop does.
    fn ready(&mut self) -> Result<(), BackendError> {
        let Some((link, cuts_seen)) = &mut self.link else { return Ok(()) };
        if link.is_cut() {
            return Err(cut());
        }
        if link.cuts() != *cuts_seen {
            *cuts_seen = link.cuts();
            self.client = http_client();
        }
        Ok(())
    }

    /// How long a call may take: [`CALL_TIMEOUT`], plus the link's longest delay.
    fn deadline(&self) -> Duration {
        CALL_TIMEOUT + self.link.as_ref().map_or(Duration::ZERO, |(link, _)| link.max_delay())
    }

    /// The call's answer, or why etcd could not answer it.
    async fn call(&mut self, path: &str, request: Value) -> Result<Value, BackendError> {
        self.try_call(path, request)
            .await?
            .map_err(|r| self.failed(path, format!("{} (gRPC code {})", r.message, r.code)))
    }

    /// The call's answer or etcd's refusal; an error when etcd cannot be reached, does
    /// not answer within [`CALL_TIMEOUT`], or answers something that is not JSON.
    /// A call cut off by a partition while under way fails as one refused by it.
    async fn try_call(
        &mut self,
        path: &str,
        request: Value,
    ) -> Result<Result<Value, Refusal>, BackendError> {
        self.ready()?;
        let cuts = self.link.as_ref().map(|(link, _)| link.cuts());
        let deadline = self.deadline();
        let answer = match tokio::time::timeout(deadline, self.exchange(path, request)).await {
            Ok(answer) => answer,
            Err(_) => Err(self.unreachable(format!(
                "no answer to {path} within {:.1} s",
                deadline.as_secs_f64()
            ))),
        };
        match &self.link {
            Some((link, _)) if answer.is_err() && Some(link.cuts()) != cuts => Err(cut()),
            _ => answer,
        }
    }

    async fn exchange(
        &self,
        path: &str,
        request: Value,
    ) -> Result<Result<Value, Refusal>, BackendError> {
        let http_request = hyper::Request::post(format!("{}{path}", self.target))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(request.to_string())))
            .map_err(|e| self.failed(path, e.to_string()))?;
        let response = self.client.request(http_request).await.map_err(|e| {
            if e.is_connect() {
                self.unreachable(causes(&e))
            } else {
                self.failed(path, causes(&e))
            }
        })?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| self.failed(path, causes(&e)));
        let body = body?.to_bytes();
        // A streaming call (keep-alive) answers one JSON object per message; the first
        // is the answer to our one request.
        let answer = serde_json::Deserializer::from_slice(&body).into_iter::<Value>().next();
        // The start of what came instead, on one line, for the error.
        let text = || {
            let text = String::from_utf8_lossy(&body);
            text.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(100)
                .collect::<String>()
        };
        let answer = match answer {
            Some(Ok(answer)) => answer,
            _ => return Err(self.failed(path, format!("HTTP {status}, not JSON: {:?}", text()))),
        };
        match refusal(&answer) {
            Some(refused) => Ok(Err(refused)),
            None if status.is_success() => Ok(Ok(answer)),
            // Not etcd's way of refusing: something else is listening there.
            None => Err(self.failed(path, format!("HTTP {status}: {:?}", text()))),
        }
    }

    fn unreachable(&self, reason: String) -> BackendError {
        BackendError::ServiceUnreachable { service: "etcd", url: self.origin.clone(), reason }
    }

    fn failed(&self, path: &str, reason: String) -> BackendError {
        BackendError::Service {
            service: "etcd",
            message: format!("{}{path}: {reason}", self.origin),
        }
    }

    /// An integer field of an answer (etcd sends int64 as a string, and leaves it out
    /// when it is 0).
    fn int(&self, path: &str, answer: &Value, field: &str) -> Result<i64, BackendError> {
        int(answer.get(field)).map_err(|why| self.failed(path, format!("{field}: {why}")))
    }

    /// The store's revision when etcd answered.
    fn header_revision(&self, path: &str, answer: &Value) -> Result<i64, BackendError> {
        self.int(path, answer.get("header").unwrap_or(&Value::Null), "revision")
    }
}

/// What a call reports while the worker's link is cut: the connection is lost, as a
/// Redis client's is (`redis.rs`), so a renewal goes unanswered and the work goes on.
fn cut() -> BackendError {
    BackendError::Lost { service: "etcd", message: "the link is cut (partition)".into() }
}

/// `http://host:port` from the URL the user gave, or why it cannot be used.
fn origin(endpoint: &str) -> Result<String, String> {
    let url = url::Url::parse(endpoint)
        .map_err(|e| format!("not a URL ({e}); expected http://host:port"))?;
    if url.scheme() != "http" {
        return Err(format!("fencelab talks to etcd over plain http://, not {}://", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("fencelab does not log in to etcd: give its URL without a user name".into());
    }
    if url.host().is_none() {
        return Err("the URL has no host; expected http://host:port".into());
    }
    Ok(url.origin().ascii_serialization())
}

/// What went wrong under a client error, in one line: hyper's own message is only
/// "client error (Connect)", the reason ("Connection refused") is in its causes.
fn causes(e: &dyn std::error::Error) -> String {
    let Some(first) = e.source() else { return e.to_string() };
    let mut text = first.to_string();
    let mut source = first.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// etcd's refusal in an answer: `{"error": "...", "code": 5, "message": "..."}`, or on a
/// stream `{"error": {"grpc_code": 5, "message": "..."}}`.
fn refusal(answer: &Value) -> Option<Refusal> {
    let error = answer.get("error")?;
    let inner = if error.is_object() { error } else { answer };
    let code = inner.get("code").or_else(|| inner.get("grpc_code")).and_then(Value::as_i64);
    let message = inner.get("message").and_then(Value::as_str).or_else(|| error.as_str());
    Some(Refusal {
        code: code.unwrap_or(0),
        message: message.unwrap_or("an error without a message").to_string(),
    })
}

/// An int64 in etcd's JSON: a string, or (as JSON allows) a number; absent means 0.
fn int(field: Option<&Value>) -> Result<i64, String> {
    match field {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) => s.parse().map_err(|_| format!("not an integer: {s:?}")),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| format!("not an integer: {n}")),
        Some(other) => Err(format!("not an integer: {other}")),
    }
}

fn b64(text: &str) -> String {
    BASE64.encode(text)
}

/// A put of `key` attached to `lease` (0: no lease, the key never expires).
fn put_request(key: &str, value: &str, lease: i64) -> Value {
    json!({ "key": b64(key), "value": b64(value), "lease": lease.to_string() })
}

impl LeaseKv for EtcdHttp {
    const WHOLE_SECONDS: bool = true;

    async fn grant(&mut self, ttl_s: i64) -> Result<i64, BackendError> {
        const PATH: &str = "/v3/lease/grant";
        let answer = self.call(PATH, json!({ "TTL": ttl_s.to_string() })).await?;
        self.int(PATH, &answer, "ID")
    }

    /// etcd compares a key that does not exist as if its revisions were 0.
    async fn put_if(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
        mod_revision: i64,
    ) -> Result<Option<i64>, BackendError> {
        const PATH: &str = "/v3/kv/txn";
        let txn = json!({
            "compare": [{
                "key": b64(key), "target": "MOD", "result": "EQUAL",
                "mod_revision": mod_revision.to_string(),
            }],
            "success": [{ "request_put": put_request(key, value, lease) }],
        });
        let answer = self.call(PATH, txn).await?;
        if answer.get("succeeded").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        self.header_revision(PATH, &answer).map(Some)
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) -> Result<i64, BackendError> {
        const PATH: &str = "/v3/kv/put";
        let answer = self.call(PATH, put_request(key, value, lease)).await?;
        self.header_revision(PATH, &answer)
    }

    async fn get(&mut self, key: &str) -> Result<Option<KeyState>, BackendError> {
        const PATH: &str = "/v3/kv/range";
        let answer = self.call(PATH, json!({ "key": b64(key) })).await?;
        let Some(kv) = answer.get("kvs").and_then(|kvs| kvs.get(0)) else { return Ok(None) };
        let encoded = kv.get("value").and_then(Value::as_str).unwrap_or("");
        let value = BASE64
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| self.failed(PATH, format!("the value of {key} is not text")))?;
        Ok(Some(KeyState {
            value,
            mod_revision: self.int(PATH, kv, "mod_revision")?,
            lease: self.int(PATH, kv, "lease")?,
        }))
    }

    async fn delete(&mut self, key: &str, if_value: Option<&str>) -> Result<bool, BackendError> {
        let Some(value) = if_value else {
            const PATH: &str = "/v3/kv/deleterange";
            let answer = self.call(PATH, json!({ "key": b64(key) })).await?;
            return Ok(self.int(PATH, &answer, "deleted")? > 0);
        };
        let txn = json!({
            "compare": [{
                "key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value),
            }],
            "success": [{ "request_delete_range": { "key": b64(key) } }],
        });
        let answer = self.call("/v3/kv/txn", txn).await?;
        Ok(answer.get("succeeded").and_then(Value::as_bool) == Some(true))
    }

    /// One round of the keep-alive stream: etcd answers a lease that is gone with a
    /// TTL of 0 rather than an error.
    async fn keep_alive(&mut self, lease: i64) -> Result<bool, BackendError> {
        const PATH: &str = "/v3/lease/keepalive";
        let answer = self.call(PATH, json!({ "ID": lease.to_string() })).await?;
        let result = answer.get("result").unwrap_or(&Value::Null);
        Ok(self.int(PATH, result, "TTL")? > 0)
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), BackendError> {
        const PATH: &str = "/v3/lease/revoke";
        match self.try_call(PATH, json!({ "ID": lease.to_string() })).await? {
            // Already expired: nothing to revoke.
            Ok(_) => Ok(()),
            Err(r) if r.code == NOT_FOUND => Ok(()),
            Err(r) => Err(self.failed(PATH, format!("{} (gRPC code {})", r.message, r.code))),
        }
    }

    /// etcd answers -1 for a lease that is gone.
    async fn time_to_live_ms(&mut self, lease: i64) -> Result<Option<u64>, BackendError> {
        const PATH: &str = "/v3/lease/timetolive";
        let answer = self.call(PATH, json!({ "ID": lease.to_string() })).await?;
        let ttl = self.int(PATH, &answer, "TTL")?;
        Ok(u64::try_from(ttl).ok().map(|s| s * 1000))
    }

    async fn revision(&mut self) -> Result<i64, BackendError> {
        const PATH: &str = "/v3/kv/range";
        let answer = self.call(PATH, json!({ "key": b64("fencelab:") })).await?;
        self.header_revision(PATH, &answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_http_url_without_a_password_is_used() {
        assert_eq!(origin("http://127.0.0.1:2379").unwrap(), "http://127.0.0.1:2379");
        assert_eq!(origin("http://127.0.0.1:2379/").unwrap(), "http://127.0.0.1:2379");
        assert!(origin("https://etcd.example:2379").unwrap_err().contains("plain http://"));
        let err = origin("http://root:hunter2@etcd.example:2379").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(origin("127.0.0.1:2379").is_err());
    }

    #[test]
    fn int64_fields_are_strings_and_absent_when_zero() {
        let answer = json!({ "ID": "7587870963425393668", "TTL": 2 });
        assert_eq!(int(answer.get("ID")), Ok(7587870963425393668));
        assert_eq!(int(answer.get("TTL")), Ok(2));
        assert_eq!(int(answer.get("deleted")), Ok(0));
        assert!(int(Some(&json!("two"))).is_err());
    }

    #[test]
    fn refusals_are_read_in_both_shapes() {
        let plain = json!({ "error": "etcdserver: requested lease not found", "code": 5,
            "message": "etcdserver: requested lease not found" });
        let r = refusal(&plain).unwrap();
        assert_eq!((r.code, r.message.as_str()), (5, "etcdserver: requested lease not found"));
        let streamed = json!({ "error": { "grpc_code": 5, "message": "lease not found" } });
        assert_eq!(refusal(&streamed).unwrap().code, 5);
        assert!(refusal(&json!({ "header": {} })).is_none());
    }
}
