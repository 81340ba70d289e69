//! `rediss://`: the same run over TLS, against a private redis-server with a
//! throwaway self-signed certificate.

use crate::support;

use std::process::Command;

use fencelab::backend::server::PrivateRedis;

#[test]
fn a_run_over_tls_works_with_rediss_urls() {
    let dir = tempfile::tempdir().unwrap();
    let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap_or_else(|e| panic!("this test needs openssl (apt-get install -y openssl): {e}"))
        .status;
    assert!(status.success());
    // A free loopback port: bind, note it, let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let (key, cert) = (key.to_str().unwrap(), cert.to_str().unwrap());
    let tls = [
        "--tls-port",
        &port,
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        cert,
        "--tls-auth-clients",
        "no",
    ];
    let _server = PrivateRedis::start_with(&tls).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("rediss://127.0.0.1:{port}/#insecure");
    let out = support::bin()
        .args(["run", "gc-pause", "--fencing", "on", "--check", "--redis", &url])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("on Redis rediss://127.0.0.1:{port}/#insecure")), "{stdout}");
    assert!(stdout.contains("storage writes: ['B(token 2)']"), "{stdout}");
}
