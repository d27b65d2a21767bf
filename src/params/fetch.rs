//! Fetching official parameter files from an IPFS gateway.
//!
//! Each file is downloaded into `<name>.partial` beside its final name, resumed with an HTTP
//! range request after a dropped connection or on the next run, hashed as it arrives, and
//! renamed into place only once its digest is the manifest's: the final name never holds a
//! partial or unchecked file. An advisory lock per file (`.<name>.fetch-lock`) makes a second
//! process that wants the same file wait for the first and then find it in place, instead of
//! downloading it again.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use reqwest::header::{CONTENT_RANGE, RANGE};
use reqwest::{StatusCode, Url};
use tokio::io::AsyncWriteExt;

use super::check::{check_file, Depth, Status};
use super::digest::{hash_file, Hasher};
use super::progress::{bytes, Board};
use super::Wanted;
use crate::porep::params::test_marker_for;

/// The gateway Filecoin's own fetchers use (go-paramfetch's default, overridden there too by
/// `IPFS_GATEWAY`); a file is `<gateway><cid>`.
pub const DEFAULT_GATEWAY: &str = "https://proofs.filecoin.io/ipfs/";

/// How a fetch runs.
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// The parameter directory the files go into.
    pub dir: PathBuf,
    /// Base URL; a file is fetched from this joined with its cid.
    pub gateway: Url,
    /// Files downloaded at once.
    pub concurrency: usize,
    /// Tries per file; each one after the first resumes where the last stopped.
    pub attempts: u32,
    /// A connection that delivers nothing for this long is dropped and the file resumed.
    pub stall_timeout: Duration,
    /// Wait before the second try, doubled for each further one.
    pub retry_delay: Duration,
}

impl FetchOptions {
    pub fn new(dir: PathBuf, gateway: &str) -> Result<FetchOptions> {
        Ok(FetchOptions {
            dir,
            gateway: gateway_url(gateway)?,
            concurrency: 3,
            attempts: 5,
            stall_timeout: Duration::from_secs(60),
            retry_delay: Duration::from_secs(2),
        })
    }
}

/// A gateway base URL, with the trailing slash that joining a cid to it needs.
pub fn gateway_url(text: &str) -> Result<Url> {
    let with_slash = if text.ends_with('/') {
        text.to_string()
    } else {
        format!("{text}/")
    };
    let url = Url::parse(&with_slash).with_context(|| format!("gateway {text:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("gateway {text:?} is not an http or https URL");
    }
    Ok(url)
}

/// What happened to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Already in place with the manifest's digest (perhaps fetched meanwhile by another
    /// process).
    AlreadyOk,
    /// Downloaded, checked and moved into place; `resumed_from` bytes were there before.
    Fetched {
        bytes: u64,
        resumed_from: u64,
    },
    Failed(String),
}

/// One file's result.
#[derive(Clone, Debug)]
pub struct FetchReport {
    pub name: String,
    pub outcome: Outcome,
}

impl FetchReport {
    pub fn line(&self) -> String {
        match &self.outcome {
            Outcome::AlreadyOk => format!("ok      {}: already in place", self.name),
            Outcome::Fetched {
                bytes: n,
                resumed_from: 0,
            } => format!("fetched {}: {}, digest ok", self.name, bytes(*n)),
            Outcome::Fetched {
                bytes: n,
                resumed_from,
            } => format!(
                "fetched {}: {}, resumed at {}, digest ok",
                self.name,
                bytes(*n),
                bytes(*resumed_from)
            ),
            Outcome::Failed(why) => format!("FAILED  {}: {why}", self.name),
        }
    }
}

/// Fetch every file that is missing or bad, `concurrency` at a time; a result line per file
/// on the board as each finishes.
pub fn fetch(opts: &FetchOptions, files: &[Wanted], board: Arc<Board>) -> Result<Vec<FetchReport>> {
    std::fs::create_dir_all(&opts.dir)
        .with_context(|| format!("cannot create {}", opts.dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("c2q-fetch")
        .build()
        .context("starting the async runtime")?;
    let reports = runtime.block_on(fetch_all(opts, files, board))?;
    // Official files replace test parameters under the same names: once every file of such a
    // circuit is the manifest's, its marker would only mislabel them.
    for w in files {
        let marker = test_marker_for(&opts.dir.join(&w.name));
        let stem_done = files
            .iter()
            .filter(|o| test_marker_for(&opts.dir.join(&o.name)) == marker)
            .all(|o| {
                reports
                    .iter()
                    .any(|r| r.name == o.name && !matches!(r.outcome, Outcome::Failed(_)))
            });
        if stem_done && marker.exists() {
            std::fs::remove_file(&marker)
                .with_context(|| format!("cannot remove {}", marker.display()))?;
        }
    }
    Ok(reports)
}

async fn fetch_all(
    opts: &FetchOptions,
    files: &[Wanted],
    board: Arc<Board>,
) -> Result<Vec<FetchReport>> {
    let mut client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .user_agent(concat!("c2q/", env!("CARGO_PKG_VERSION")));
    // A gateway on this host is never reached through a proxy configured for the outside.
    if opts.gateway.host_str().is_some_and(|h| {
        h == "localhost"
            || h.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }) {
        client = client.no_proxy();
    }
    let client = client.build().context("building the HTTP client")?;
    let gate = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, w) in files.iter().enumerate() {
        let (opts, w, board, client, gate) = (
            opts.clone(),
            w.clone(),
            board.clone(),
            client.clone(),
            gate.clone(),
        );
        tasks.spawn(async move {
            let _slot = gate.acquire_owned().await;
            let outcome = match fetch_one(&opts, &w, &board, &client).await {
                Ok(o) => o,
                Err(e) => Outcome::Failed(format!("{e:#}")),
            };
            let report = FetchReport {
                name: w.name.clone(),
                outcome,
            };
            board.println(&report.line());
            (i, report)
        });
    }
    let mut reports = Vec::with_capacity(files.len());
    while let Some(done) = tasks.join_next().await {
        reports.push(done.context("a fetch task panicked")?);
    }
    reports.sort_by_key(|(i, _)| *i);
    Ok(reports.into_iter().map(|(_, r)| r).collect())
}

/// Whether the file in place is the published one (digest checked).
async fn in_place(dir: &Path, w: &Wanted, board: &Arc<Board>) -> Result<bool> {
    let (dir, w, board) = (dir.to_path_buf(), w.clone(), board.clone());
    let report = tokio::task::spawn_blocking(move || check_file(&dir, &w, Depth::Digest, &board))
        .await
        .context("the digest task panicked")?;
    Ok(report.status == Status::Ok)
}

async fn fetch_one(
    opts: &FetchOptions,
    w: &Wanted,
    board: &Arc<Board>,
    client: &reqwest::Client,
) -> Result<Outcome> {
    if in_place(&opts.dir, w, board).await? {
        return Ok(Outcome::AlreadyOk);
    }
    let lock_path = opts.dir.join(format!(".{}.fetch-lock", w.name));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    let lock = match lock.try_lock() {
        Ok(()) => lock,
        Err(std::fs::TryLockError::WouldBlock) => {
            board.note(&format!(
                "{}: another process is fetching it; waiting",
                w.name
            ));
            let lock = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
                .await
                .context("the lock task panicked")?
                .with_context(|| format!("cannot lock {}", lock_path.display()))?;
            // The holder renames the file into place only after checking its digest, but
            // check again: it may have failed.
            if in_place(&opts.dir, w, board).await? {
                return Ok(Outcome::AlreadyOk);
            }
            lock
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
        }
    };
    let outcome = download(opts, w, board, client).await;
    drop(lock);
    outcome
}

/// Why one try stopped.
enum TryError {
    /// Worth another try, resuming (network trouble, a server error).
    Transient(anyhow::Error),
    /// Another try would fail the same way.
    Fatal(anyhow::Error),
}

impl From<std::io::Error> for TryError {
    /// Local file errors (a full disk, permissions) are not cured by retrying.
    fn from(e: std::io::Error) -> Self {
        TryError::Fatal(e.into())
    }
}

/// A partial download: its bytes on disk and their hash so far.
struct Partial {
    path: PathBuf,
    hasher: Hasher,
    /// Bytes hashed (and on disk).
    len: u64,
    /// The first length seen: what an earlier run left.
    resumed_from: u64,
}

impl Partial {
    /// Pick up what an earlier run left, hashing it.
    async fn open(path: PathBuf, name: &str, board: &Arc<Board>) -> Result<Partial> {
        let have = match tokio::fs::metadata(&path).await {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
        };
        let mut hasher = Hasher::default();
        if have > 0 {
            let (p, b, label) = (path.clone(), board.clone(), name.to_string());
            hasher = tokio::task::spawn_blocking(move || -> Result<Hasher> {
                let bar = b.start(&label, "rehash", 0, Some(have));
                let mut h = Hasher::default();
                let read = hash_file(&p, Some(have), &mut h, &mut |d| b.set(bar, d, None));
                b.end(bar);
                read?;
                Ok(h)
            })
            .await
            .context("the hashing task panicked")??;
        }
        Ok(Partial {
            path,
            hasher,
            len: have,
            resumed_from: have,
        })
    }

    async fn restart(&mut self) -> std::io::Result<()> {
        tokio::fs::File::create(&self.path).await?;
        self.hasher = Hasher::default();
        self.len = 0;
        self.resumed_from = 0;
        Ok(())
    }
}

async fn download(
    opts: &FetchOptions,
    w: &Wanted,
    board: &Arc<Board>,
    client: &reqwest::Client,
) -> Result<Outcome> {
    let url = opts
        .gateway
        .join(&w.entry.cid)
        .with_context(|| format!("cannot join cid {} to {}", w.entry.cid, opts.gateway))?;
    let final_path = opts.dir.join(&w.name);
    let mut partial =
        Partial::open(opts.dir.join(format!("{}.partial", w.name)), &w.name, board).await?;
    let mut tries = 0;
    loop {
        tries += 1;
        match one_try(&url, &mut partial, opts, w, board, client).await {
            Ok(()) => break,
            Err(TryError::Transient(e)) if tries < opts.attempts.max(1) => {
                let wait = opts.retry_delay * 2u32.saturating_pow(tries - 1);
                board.note(&format!(
                    "{}: {e:#}; resuming at {} in {:.1} s (try {} of {})",
                    w.name,
                    bytes(partial.len),
                    wait.as_secs_f64(),
                    tries + 1,
                    opts.attempts
                ));
                tokio::time::sleep(wait).await;
                // The file on disk is the truth: whatever a failed write left is rehashed.
                let on_disk = tokio::fs::metadata(&partial.path)
                    .await
                    .map(|m| m.len())
                    .unwrap_or(0);
                if on_disk != partial.len {
                    let resumed_from = partial.resumed_from;
                    partial = Partial::open(partial.path.clone(), &w.name, board).await?;
                    partial.resumed_from = resumed_from;
                }
            }
            Err(TryError::Transient(e)) => {
                return Err(e.context(format!("gave up after {tries} tries ({url})")))
            }
            Err(TryError::Fatal(e)) => return Err(e.context(format!("{url}"))),
        }
    }
    let digest = partial.hasher.finish();
    if digest != w.entry.digest {
        // Resuming would only append to wrong bytes: start from nothing next time.
        let _ = tokio::fs::remove_file(&partial.path).await;
        bail!(
            "digest mismatch after download from {url}: {digest}, the manifest has {} ({} \
             received; the partial file was removed)",
            w.entry.digest,
            bytes(partial.len)
        );
    }
    let (from, to) = (partial.path.clone(), final_path.clone());
    tokio::task::spawn_blocking(move || put_in_place(&from, &to))
        .await
        .context("the rename task panicked")??;
    Ok(Outcome::Fetched {
        bytes: partial.len,
        resumed_from: partial.resumed_from,
    })
}

/// Flush the checked file to disk and rename it over the final name, so that a crash leaves
/// either the old state or the whole new file.
fn put_in_place(from: &Path, to: &Path) -> Result<()> {
    File::open(from)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("cannot sync {}", from.display()))?;
    std::fs::rename(from, to)
        .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
    if let Some(dir) = to.parent() {
        // The rename itself is durable once the directory is synced; failing that only costs
        // a re-download after a crash.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// One request: from `partial.len` to the end, appended to the partial file.
async fn one_try(
    url: &Url,
    partial: &mut Partial,
    opts: &FetchOptions,
    w: &Wanted,
    board: &Arc<Board>,
    client: &reqwest::Client,
) -> std::result::Result<(), TryError> {
    let mut request = client.get(url.clone());
    if partial.len > 0 {
        request = request.header(RANGE, format!("bytes={}-", partial.len));
    }
    let response = tokio::time::timeout(opts.stall_timeout, request.send())
        .await
        .map_err(|_| {
            TryError::Transient(anyhow!(
                "no response within {} s",
                opts.stall_timeout.as_secs_f64()
            ))
        })?
        .map_err(|e| TryError::Transient(anyhow!(e).context("request failed")))?;
    let status = response.status();
    let total = match status {
        StatusCode::PARTIAL_CONTENT => {
            let range = content_range(&response).map_err(TryError::Transient)?;
            if range.start != partial.len {
                // A server that answers another range than asked: start over rather than
                // splice bytes at the wrong offset.
                let asked = partial.len;
                partial.restart().await?;
                return Err(TryError::Transient(anyhow!(
                    "the server sent bytes from {} when asked from {asked}",
                    range.start
                )));
            }
            range.total
        }
        StatusCode::OK => {
            if partial.len > 0 {
                // The server ignores ranges: the whole file comes again.
                partial.restart().await?;
            }
            response.content_length()
        }
        StatusCode::RANGE_NOT_SATISFIABLE => {
            let total = content_range(&response).ok().and_then(|r| r.total);
            if total == Some(partial.len) {
                // An earlier run received everything but stopped before the rename.
                return Ok(());
            }
            partial.restart().await?;
            return Err(TryError::Transient(anyhow!(
                "the server refused to resume at {}",
                bytes(partial.len)
            )));
        }
        s if s.is_server_error()
            || s == StatusCode::TOO_MANY_REQUESTS
            || s == StatusCode::REQUEST_TIMEOUT =>
        {
            return Err(TryError::Transient(anyhow!("HTTP {s}")));
        }
        s => return Err(TryError::Fatal(anyhow!("HTTP {s}"))),
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&partial.path)
        .map_err(|e| {
            TryError::Fatal(anyhow!(e).context(format!("cannot open {}", partial.path.display())))
        })?;
    let mut out = tokio::io::BufWriter::with_capacity(1 << 20, tokio::fs::File::from_std(file));
    let bar = board.start(&w.name, "download", partial.len, total);
    let result = stream_body(response, partial, &mut out, opts, board, bar).await;
    board.end(bar);
    // What was received is kept for the next try even when the connection broke.
    out.flush().await?;
    out.into_inner().sync_data().await?;
    result?;
    if let Some(t) = total {
        if partial.len != t {
            return Err(TryError::Transient(anyhow!(
                "the connection ended at {} of {}",
                bytes(partial.len),
                bytes(t)
            )));
        }
    }
    Ok(())
}

async fn stream_body(
    mut response: reqwest::Response,
    partial: &mut Partial,
    out: &mut tokio::io::BufWriter<tokio::fs::File>,
    opts: &FetchOptions,
    board: &Arc<Board>,
    bar: super::progress::BarId,
) -> std::result::Result<(), TryError> {
    loop {
        let chunk = tokio::time::timeout(opts.stall_timeout, response.chunk())
            .await
            .map_err(|_| {
                TryError::Transient(anyhow!(
                    "no data for {} s",
                    opts.stall_timeout.as_secs_f64()
                ))
            })?
            .map_err(|e| TryError::Transient(anyhow!(e).context("the download broke off")))?;
        let Some(chunk) = chunk else {
            return Ok(());
        };
        out.write_all(&chunk).await?;
        partial.hasher.update(&chunk);
        partial.len += chunk.len() as u64;
        board.set(bar, partial.len, None);
    }
}

/// `Content-Range: bytes START-END/TOTAL` (or `bytes */TOTAL` on a 416).
struct ContentRange {
    start: u64,
    total: Option<u64>,
}

fn content_range(response: &reqwest::Response) -> Result<ContentRange> {
    let value = response
        .headers()
        .get(CONTENT_RANGE)
        .ok_or_else(|| anyhow!("a partial response without Content-Range"))?
        .to_str()
        .context("Content-Range is not text")?;
    parse_content_range(value)
}

fn parse_content_range(value: &str) -> Result<ContentRange> {
    let bad = || anyhow!("malformed Content-Range {value:?}");
    let rest = value.trim().strip_prefix("bytes ").ok_or_else(bad)?;
    let (range, total) = rest.split_once('/').ok_or_else(bad)?;
    let total = match total {
        "*" => None,
        t => Some(t.parse::<u64>().map_err(|_| bad())?),
    };
    let start = match range {
        "*" => 0,
        r => {
            let (start, _end) = r.split_once('-').ok_or_else(bad)?;
            start.parse::<u64>().map_err(|_| bad())?
        }
    };
    Ok(ContentRange { start, total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_parse() {
        let r = parse_content_range("bytes 100-199/200").unwrap();
        assert_eq!((r.start, r.total), (100, Some(200)));
        let r = parse_content_range("bytes */200").unwrap();
        assert_eq!(r.total, Some(200));
        let r = parse_content_range("bytes 5-9/*").unwrap();
        assert_eq!((r.start, r.total), (5, None));
        assert!(parse_content_range("items 1-2/3").is_err());
        assert!(parse_content_range("bytes x-2/3").is_err());
    }

    #[test]
    fn gateways_get_their_trailing_slash() {
        let url = gateway_url("http://127.0.0.1:8080/ipfs").unwrap();
        assert_eq!(
            url.join("QmX").unwrap().as_str(),
            "http://127.0.0.1:8080/ipfs/QmX"
        );
        assert_eq!(
            gateway_url(DEFAULT_GATEWAY)
                .unwrap()
                .join("QmX")
                .unwrap()
                .as_str(),
            "https://proofs.filecoin.io/ipfs/QmX"
        );
        assert!(gateway_url("ftp://example.org/").is_err());
        assert!(gateway_url("not a url").is_err());
    }
}
