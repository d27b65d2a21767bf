//! The ledger over TLS. With `sslmode=require` the worker's PostgreSQL connections are encrypted
//! and the server's certificate is verified against the CA in `C2Q_PG_SSLROOTCERT`; a server
//! whose certificate that CA did not sign is refused at once, with a reason, instead of being
//! retried as an outage.
//!
//! The test gives the local PostgreSQL a certificate for 127.0.0.1 signed by a CA of its own
//! (`ALTER SYSTEM`, then a reload) and puts the server's settings back when it ends. Plain
//! connections are not affected, so other tests may run meanwhile.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use c2q::config::LedgerConfig;
use c2q::ledger::Ledger;

const SCHEMA: &str = "c2q_tls_test";

fn psql(sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "test",
            "-Atc",
            sql,
        ])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA.
struct Certs {
    ca: PathBuf,
    other_ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

fn make_certs(dir: &Path) -> Certs {
    let self_signed = |name: &str, cn: &str| {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
                "-subj",
                &format!("/CN={cn}"),
            ],
        )
    };
    self_signed("ca", "c2q test CA");
    self_signed("other", "some other CA");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("write ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            "server.pem",
            "-extfile",
            "san.ext",
        ],
    );
    Certs {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
    }
}

/// The server's own certificate settings come back when the test ends, however it ends.
struct RestoreServer;

impl Drop for RestoreServer {
    fn drop(&mut self) {
        psql("ALTER SYSTEM RESET ssl_cert_file");
        psql("ALTER SYSTEM RESET ssl_key_file");
        psql("SELECT pg_reload_conf()");
        psql(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"));
    }
}

fn use_server_cert(certs: &Certs) -> RestoreServer {
    // The server reads its key as its own user, which insists on a private key file.
    let uid: u32 = String::from_utf8_lossy(
        &Command::new("id")
            .args(["-u", "postgres"])
            .output()
            .expect("id -u postgres")
            .stdout,
    )
    .trim()
    .parse()
    .expect("uid of postgres");
    std::os::unix::fs::chown(&certs.server_key, Some(uid), None).expect("chown key");
    std::fs::set_permissions(&certs.server_key, std::fs::Permissions::from_mode(0o600))
        .expect("chmod key");
    std::fs::set_permissions(&certs.server_cert, std::fs::Permissions::from_mode(0o644))
        .expect("chmod cert");
    let restore = RestoreServer;
    let cert = certs.server_cert.display().to_string();
    psql(&format!("ALTER SYSTEM SET ssl_cert_file = '{cert}'"));
    psql(&format!(
        "ALTER SYSTEM SET ssl_key_file = '{}'",
        certs.server_key.display()
    ));
    psql("SELECT pg_reload_conf()");
    let deadline = Instant::now() + Duration::from_secs(10);
    while psql("SHOW ssl_cert_file") != cert {
        assert!(
            Instant::now() < deadline,
            "PostgreSQL did not reload its certificate"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    restore
}

fn tls_config() -> LedgerConfig {
    LedgerConfig {
        url: "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=require".into(),
        schema: SCHEMA.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn sslmode_require_verifies_the_server_and_refuses_an_unknown_one_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // PostgreSQL's own user must be able to reach the files.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let certs = make_certs(dir.path());
    let _restore = use_server_cert(&certs);

    // The CA that signed the server's certificate: connected, and over TLS.
    std::env::set_var("C2Q_PG_SSLROOTCERT", &certs.ca);
    let ledger = Ledger::connect(&tls_config())
        .await
        .expect("ledger over TLS with the right CA");
    assert!(ledger.ping().await, "the TLS ledger answers");
    let encrypted = psql(
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'c2q' AND s.ssl",
    );
    assert!(
        encrypted.parse::<u32>().unwrap_or(0) >= 1,
        "no encrypted c2q connection in pg_stat_ssl ({encrypted})"
    );
    drop(ledger);

    // A CA that did not sign it: refused, quickly, saying why.
    std::env::set_var("C2Q_PG_SSLROOTCERT", &certs.other_ca);
    let started = Instant::now();
    let err = match Ledger::connect(&tls_config()).await {
        Ok(_) => panic!("connected to a server whose certificate no trusted CA signed"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a certificate failure was retried like an outage ({:?})",
        started.elapsed()
    );
    assert!(
        err.to_lowercase().contains("certificate"),
        "the error does not say what is wrong: {err}"
    );
}
