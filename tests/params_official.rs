//! `c2q params check` and `c2q params fetch` against a small manifest and a gateway on
//! 127.0.0.1 that serves files of a few KB right, truncated, corrupt, slowly, or with the
//! connection dropped mid-body.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use c2q::params::digest::Hasher;
use common::c2q;

/// The real names of the 2 KiB and 8 MiB files (the CLI resolves `--proof` to them).
const P2K: &str = "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f.params";
const V2K: &str = "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f.vk";
const P8M: &str = "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-ecd683648512ab1765faa2a5f14bab48f676e633467f0aa8aad4b55dcb0652bb.params";
const V8M: &str = "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-ecd683648512ab1765faa2a5f14bab48f676e633467f0aa8aad4b55dcb0652bb.vk";

/// A file in bellperson's layout (verifying key, then H, L, A, B in G1 and B in G2, each
/// counted) with `points` points per set and bytes from `seed`: what the checks accept as a
/// whole parameter file.
fn fake(vk: bool, points: u32, seed: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let fill = |out: &mut Vec<u8>, n: usize| {
        out.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    };
    fill(&mut out, 3 * 96 + 3 * 192);
    let sets: &[usize] = if vk {
        &[96]
    } else {
        &[96, 96, 96, 96, 96, 192]
    };
    for &point in sets {
        out.extend_from_slice(&points.to_be_bytes());
        fill(&mut out, points as usize * point);
    }
    out
}

fn digest(bytes: &[u8]) -> String {
    let mut h = Hasher::default();
    h.update(bytes);
    h.finish().to_string()
}

/// Files by name, with the cid each is served under.
struct Set {
    files: Vec<(&'static str, String, Vec<u8>)>,
}

impl Set {
    /// The 2 KiB and 8 MiB files; `big` points per set for the 2 KiB `.params` (~500 bytes a
    /// point, so a few KB).
    fn new(big: u32) -> Set {
        Set {
            files: vec![
                (P2K, "cid-p2k".into(), fake(false, big, 1)),
                (V2K, "cid-v2k".into(), fake(true, 3, 2)),
                (P8M, "cid-p8m".into(), fake(false, 4, 3)),
                (V8M, "cid-v8m".into(), fake(true, 5, 4)),
            ],
        }
    }

    fn bytes(&self, name: &str) -> &[u8] {
        &self.files.iter().find(|f| f.0 == name).unwrap().2
    }

    fn manifest(&self, dir: &Path) -> PathBuf {
        let mut m = serde_json::Map::new();
        for (name, cid, bytes) in &self.files {
            m.insert(
                name.to_string(),
                serde_json::json!({"cid": cid, "digest": digest(bytes), "sector_size": 2048}),
            );
        }
        let path = dir.join("manifest.json");
        std::fs::write(&path, serde_json::Value::Object(m).to_string()).unwrap();
        path
    }

    fn place(&self, dir: &Path) {
        for (name, _, bytes) in &self.files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

/// How the gateway serves a cid.
#[derive(Clone)]
enum Serve {
    Right,
    /// The first `n` bytes, announced as the whole file.
    Truncated(usize),
    /// One byte changed.
    Corrupt,
    /// In 256-byte pieces, a pause between them.
    Slow(Duration),
    /// The first request announces the whole file, sends `n` bytes and closes.
    DropAfter(usize),
}

#[derive(Default)]
struct Log {
    /// (cid, Range header) per request.
    requests: Vec<(String, Option<String>)>,
    /// Body bytes sent per cid.
    sent: HashMap<String, usize>,
}

struct Gateway {
    url: String,
    log: Arc<Mutex<Log>>,
}

impl Gateway {
    fn start(set: &Set, how: HashMap<&'static str, Serve>) -> Gateway {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/ipfs/", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Log::default()));
        let files: HashMap<String, (Vec<u8>, Serve)> = set
            .files
            .iter()
            .map(|(name, cid, bytes)| {
                let serve = how.get(name).cloned().unwrap_or(Serve::Right);
                (cid.clone(), (bytes.clone(), serve))
            })
            .collect();
        let files = Arc::new(files);
        let server_log = log.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (files, log) = (files.clone(), server_log.clone());
                thread::spawn(move || {
                    let _ = serve(stream, &files, &log);
                });
            }
        });
        Gateway { url, log }
    }

    fn requests(&self, cid: &str) -> Vec<Option<String>> {
        let log = self.log.lock().unwrap();
        log.requests
            .iter()
            .filter(|(c, _)| c == cid)
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn sent(&self, cid: &str) -> usize {
        self.log.lock().unwrap().sent.get(cid).copied().unwrap_or(0)
    }
}

fn serve(
    stream: TcpStream,
    files: &HashMap<String, (Vec<u8>, Serve)>,
    log: &Mutex<Log>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let cid = path.trim_start_matches("/ipfs/").to_string();
    let mut out = stream;
    let first = {
        let mut log = log.lock().unwrap();
        log.requests.push((cid.clone(), range.clone()));
        log.requests.iter().filter(|(c, _)| *c == cid).count() == 1
    };
    let Some((bytes, how)) = files.get(&cid) else {
        return out.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    };
    let mut body = bytes.clone();
    match how {
        Serve::Truncated(n) => body.truncate(*n),
        Serve::Corrupt => {
            let middle = body.len() / 2;
            body[middle] ^= 1;
        }
        _ => {}
    }
    let total = body.len();
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
        .unwrap_or(0);
    let head = if start > 0 {
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{total}\r\nConnection: close\r\n\r\n",
            total - start,
            total - 1
        )
    } else {
        format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n")
    };
    out.write_all(head.as_bytes())?;
    let body = &body[start..];
    let send = |out: &mut TcpStream, piece: &[u8]| -> std::io::Result<()> {
        out.write_all(piece)?;
        out.flush()?;
        *log.lock().unwrap().sent.entry(cid.clone()).or_default() += piece.len();
        Ok(())
    };
    match how {
        Serve::Slow(pause) => {
            for piece in body.chunks(256) {
                send(&mut out, piece)?;
                thread::sleep(*pause);
            }
        }
        Serve::DropAfter(n) if first => {
            send(&mut out, &body[..*n])?;
            // Closed with the body unfinished: the client sees the connection break.
            out.shutdown(std::net::Shutdown::Both)?;
        }
        _ => send(&mut out, body)?,
    }
    // Drain anything left so the close is clean.
    let _ = reader.read(&mut [0u8; 64]);
    Ok(())
}

fn run(args: &[&str], dir: &Path, manifest: &Path) -> Output {
    c2q()
        .env_remove("IPFS_GATEWAY")
        .env_remove("FIL_PROOFS_PARAMETER_CACHE")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .arg("--manifest")
        .arg(manifest)
        .output()
        .unwrap()
}

fn fetch(gw: &Gateway, dir: &Path, manifest: &Path, proofs: &str) -> Output {
    run(
        &[
            "params",
            "fetch",
            "--proof",
            proofs,
            "--from",
            &gw.url,
            "--retry-delay-s",
            "0.05",
            "--stall-timeout-s",
            "5",
        ],
        dir,
        manifest,
    )
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn line_for(out: &Output, name: &str) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no line for {name}: {}", text(out)))
        .to_string()
}

#[test]
fn fetch_downloads_what_is_missing_checks_it_and_skips_what_is_there() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    let gw = Gateway::start(&set, HashMap::new());
    let out = fetch(&gw, &dir, &manifest, "2KiB,8MiB");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for (name, cid, bytes) in &set.files {
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), bytes);
        assert!(
            line_for(&out, name).starts_with("fetched"),
            "{}",
            text(&out)
        );
        assert_eq!(gw.requests(cid), [None]);
    }
    assert!(std::fs::read_dir(&dir).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".partial")));

    // Again: everything is in place, nothing is requested.
    let again = fetch(&gw, &dir, &manifest, "2KiB,8MiB");
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(line_for(&again, P2K).starts_with("ok"), "{}", text(&again));
    assert_eq!(gw.requests("cid-p2k").len(), 1);

    // And the check agrees.
    let check = run(
        &["params", "check", "--proof", "2KiB,8MiB"],
        &dir,
        &manifest,
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
}

#[test]
fn truncated_or_corrupt_downloads_are_refused_and_never_put_in_place() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    let gw = Gateway::start(
        &set,
        HashMap::from([(P2K, Serve::Truncated(1000)), (V2K, Serve::Corrupt)]),
    );
    let out = fetch(&gw, &dir, &manifest, "2KiB");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    for name in [P2K, V2K] {
        let line = line_for(&out, name);
        assert!(
            line.starts_with("FAILED") && line.contains("digest mismatch"),
            "{}",
            text(&out)
        );
        assert!(!dir.join(name).exists());
        assert!(!dir.join(format!("{name}.partial")).exists());
    }
    // A digest mismatch is not retried: the gateway would serve the same bytes.
    assert_eq!(gw.requests("cid-p2k").len(), 1);
}

#[test]
fn a_dropped_connection_is_resumed_where_it_broke() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(40);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    let len = set.bytes(P2K).len();
    let gw = Gateway::start(&set, HashMap::from([(P2K, Serve::DropAfter(5000))]));
    let out = fetch(&gw, &dir, &manifest, "2KiB");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read(dir.join(P2K)).unwrap(), set.bytes(P2K));
    assert_eq!(
        gw.requests("cid-p2k"),
        [None, Some("bytes=5000-".to_string())]
    );
    // The broken-off bytes were not sent twice.
    assert_eq!(gw.sent("cid-p2k"), len);
}

#[test]
fn a_partial_file_from_an_earlier_run_is_resumed() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(20);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = set.bytes(P2K);
    std::fs::write(dir.join(format!("{P2K}.partial")), &bytes[..3000]).unwrap();
    let gw = Gateway::start(&set, HashMap::new());
    let out = fetch(&gw, &dir, &manifest, "2KiB");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read(dir.join(P2K)).unwrap(), bytes);
    assert_eq!(gw.requests("cid-p2k"), [Some("bytes=3000-".to_string())]);
    assert_eq!(gw.sent("cid-p2k"), bytes.len() - 3000);
    assert!(line_for(&out, P2K).contains("resumed at"), "{}", text(&out));
}

#[test]
fn a_slow_gateway_is_waited_for() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    let gw = Gateway::start(
        &set,
        HashMap::from([(P2K, Serve::Slow(Duration::from_millis(20)))]),
    );
    let out = fetch(&gw, &dir, &manifest, "2KiB");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read(dir.join(P2K)).unwrap(), set.bytes(P2K));
}

#[test]
fn two_fetches_of_the_same_file_download_it_once() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    // 13 pieces of 256 bytes 150 ms apart: the first fetch holds the lock for about two
    // seconds while the second starts.
    let gw = Gateway::start(
        &set,
        HashMap::from([(P2K, Serve::Slow(Duration::from_millis(150)))]),
    );
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| fetch(&gw, &dir, &manifest, "2KiB"));
        thread::sleep(Duration::from_millis(400));
        let b = s.spawn(|| fetch(&gw, &dir, &manifest, "2KiB"));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    assert_eq!(
        gw.requests("cid-p2k").len(),
        1,
        "{}\n{}",
        text(&a),
        text(&b)
    );
    assert_eq!(gw.sent("cid-p2k"), set.bytes(P2K).len());
    // Whichever took the lock first downloaded; the other waited and found the file.
    let (first, second) = if line_for(&a, P2K).starts_with("fetched") {
        (&a, &b)
    } else {
        (&b, &a)
    };
    assert!(
        line_for(first, P2K).starts_with("fetched"),
        "{}",
        text(first)
    );
    assert!(line_for(second, P2K).starts_with("ok"), "{}", text(second));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("waiting"),
        "{}",
        text(second)
    );
}

#[test]
fn check_names_each_file_missing_truncated_corrupt_or_test() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let dir = work.path().join("params");
    std::fs::create_dir_all(&dir).unwrap();
    set.place(&dir);
    let check = |size_only: bool| {
        let mut args = vec!["params", "check", "--proof", "2KiB", "--proof", "8MiB"];
        if size_only {
            args.push("--size-only");
        }
        run(&args, &dir, &manifest)
    };
    let out = check(false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // The 2 KiB .params truncated, the 2 KiB .vk with a byte changed, the 8 MiB .vk gone, and
    // the 8 MiB .params marked as test parameters.
    let p2k = set.bytes(P2K);
    std::fs::write(dir.join(P2K), &p2k[..p2k.len() - 10]).unwrap();
    let mut v2k = set.bytes(V2K).to_vec();
    v2k[900] ^= 0x80;
    std::fs::write(dir.join(V2K), &v2k).unwrap();
    std::fs::remove_file(dir.join(V8M)).unwrap();
    let marker = dir.join(P8M).with_extension("c2q-test-params");
    std::fs::write(&marker, "{}").unwrap();
    let mut bad = set.bytes(P8M).to_vec();
    bad[0] ^= 1;
    std::fs::write(dir.join(P8M), &bad).unwrap();

    let out = check(false);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(line_for(&out, P2K).contains("wrong size"), "{}", text(&out));
    assert!(line_for(&out, P2K).contains("truncated"), "{}", text(&out));
    assert!(
        line_for(&out, V2K).contains("digest mismatch"),
        "{}",
        text(&out)
    );
    assert!(line_for(&out, V8M).contains("missing"), "{}", text(&out));
    assert!(
        line_for(&out, P8M).contains("test parameters"),
        "{}",
        text(&out)
    );

    // Sizes only: the changed byte goes unseen, the rest does not.
    let out = check(true);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(line_for(&out, V2K).contains("size only"), "{}", text(&out));
    assert!(line_for(&out, P2K).contains("wrong size"), "{}", text(&out));
    assert!(
        line_for(&out, P8M).contains("test parameters"),
        "{}",
        text(&out)
    );

    // Fetching replaces the bad and the test files, and the marker goes with them.
    let gw = Gateway::start(&set, HashMap::new());
    let out = fetch(&gw, &dir, &manifest, "2KiB,8MiB");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!marker.exists());
    assert_eq!(check(false).status.code(), Some(0));
}

#[test]
fn unknown_proofs_and_bad_gateways_are_bad_input() {
    let work = tempfile::tempdir().unwrap();
    let set = Set::new(4);
    let manifest = set.manifest(work.path());
    let out = run(
        &["params", "check", "--proof", "16GiB"],
        work.path(),
        &manifest,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(
        &["params", "fetch", "--proof", "2KiB", "--from", "ftp://x/"],
        work.path(),
        &manifest,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // A proof the manifest has no files for.
    let out = run(
        &["params", "check", "--proof", "32GiB"],
        work.path(),
        &manifest,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("publishes no"));
}
