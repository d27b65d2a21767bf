//! Progress of long file operations (hashing a 47 GB file, downloading it): one live bar per
//! file on a terminal, plain lines otherwise (logs, systemd, CI), where a bar redrawn with
//! escape codes would be noise.
//!
//! Bars go to stderr; each file's result line goes to stdout, so that `c2q params check > out`
//! keeps only the results.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Bars redrawn in place (stderr is a terminal).
    Live,
    /// A line at the start and at every tenth of a large file.
    Lines,
    /// Nothing but the result lines.
    Quiet,
}

impl Style {
    /// `Live` when stderr is a terminal, else `Lines`.
    pub fn detect() -> Style {
        if std::io::stderr().is_terminal() {
            Style::Live
        } else {
            Style::Lines
        }
    }
}

/// Files below this size get no intermediate lines in `Lines` style: they take no time.
const PLAIN_MIN_BYTES: u64 = 64 << 20;
/// Live bars are redrawn at most this often.
const REDRAW: Duration = Duration::from_millis(150);

/// A bar on the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarId(usize);

struct Bar {
    id: usize,
    label: String,
    activity: &'static str,
    done: u64,
    total: Option<u64>,
    /// Tenths already printed in `Lines` style.
    tenths: u64,
    started: Instant,
    /// Bytes at `started`: a resumed download's speed counts only what came this time.
    base: u64,
}

struct State {
    bars: Vec<Bar>,
    next: usize,
    /// Lines the live area took when last drawn.
    drawn: usize,
    last_draw: Option<Instant>,
}

/// The bars of one command.
pub struct Board {
    style: Style,
    state: Mutex<State>,
}

impl Board {
    pub fn new(style: Style) -> Board {
        Board {
            style,
            state: Mutex::new(State {
                bars: Vec::new(),
                next: 0,
                drawn: 0,
                last_draw: None,
            }),
        }
    }

    /// A bar for `label` (a file name) doing `activity` ("digest", "download") from `done`
    /// bytes of `total`.
    pub fn start(
        &self,
        label: &str,
        activity: &'static str,
        done: u64,
        total: Option<u64>,
    ) -> BarId {
        let mut s = self.lock();
        let id = s.next;
        s.next += 1;
        s.bars.push(Bar {
            id,
            label: label.to_string(),
            activity,
            done,
            total,
            tenths: tenths(done, total),
            started: Instant::now(),
            base: done,
        });
        match self.style {
            Style::Live => self.redraw(&mut s, true),
            Style::Lines => {
                let bar = &s.bars[s.bars.len() - 1];
                if total.is_none_or(|t| t >= PLAIN_MIN_BYTES) {
                    eprintln!("{}: {} {}", bar.label, bar.activity, amount(done, total));
                }
            }
            Style::Quiet => {}
        }
        BarId(id)
    }

    /// Bytes done so far (and the total, once known).
    pub fn set(&self, bar: BarId, done: u64, total: Option<u64>) {
        let mut s = self.lock();
        let Some(b) = s.bars.iter_mut().find(|b| b.id == bar.0) else {
            return;
        };
        b.done = done;
        if total.is_some() {
            b.total = total;
        }
        match self.style {
            Style::Live => self.redraw(&mut s, false),
            Style::Lines => {
                let t = tenths(b.done, b.total);
                if t > b.tenths && b.total.is_some_and(|t| t >= PLAIN_MIN_BYTES) {
                    b.tenths = t;
                    eprintln!(
                        "{}: {} {}{}",
                        b.label,
                        b.activity,
                        amount(b.done, b.total),
                        rate(b)
                    );
                }
            }
            Style::Quiet => {}
        }
    }

    /// Remove the bar.
    pub fn end(&self, bar: BarId) {
        let mut s = self.lock();
        s.bars.retain(|b| b.id != bar.0);
        if self.style == Style::Live {
            self.redraw(&mut s, true);
        }
    }

    /// A result line on stdout, above the live bars.
    pub fn println(&self, line: &str) {
        let mut s = self.lock();
        if self.style == Style::Live {
            clear(&mut s);
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout (`| head`) must not abort a download.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        drop(out);
        if self.style == Style::Live {
            self.redraw(&mut s, true);
        }
    }

    /// A note on stderr (waiting for a lock, a retry), above the live bars.
    pub fn note(&self, line: &str) {
        let mut s = self.lock();
        if self.style == Style::Live {
            clear(&mut s);
        }
        eprintln!("{line}");
        if self.style == Style::Live {
            self.redraw(&mut s, true);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while drawing leaves nothing half-updated that matters: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn redraw(&self, s: &mut State, force: bool) {
        if !force && s.last_draw.is_some_and(|t| t.elapsed() < REDRAW) {
            return;
        }
        clear(s);
        let mut err = std::io::stderr().lock();
        for b in &s.bars {
            let _ = writeln!(err, "{}", live_line(b));
        }
        let _ = err.flush();
        s.drawn = s.bars.len();
        s.last_draw = Some(Instant::now());
    }
}

/// Erase the live area (cursor up over it, clear to the end of the screen).
fn clear(s: &mut State) {
    if s.drawn > 0 {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\x1b[{}F\x1b[J", s.drawn);
        let _ = err.flush();
        s.drawn = 0;
    }
}

fn live_line(b: &Bar) -> String {
    const WIDTH: usize = 24;
    let bar = match b.total {
        Some(t) if t > 0 => {
            let filled = ((b.done.min(t) as u128 * WIDTH as u128) / t as u128) as usize;
            format!("[{}{}]", "#".repeat(filled), "-".repeat(WIDTH - filled))
        }
        _ => format!("[{}]", "?".repeat(WIDTH)),
    };
    // Parameter names are long: keep the distinguishing end of the name.
    let label = if b.label.len() > 40 {
        format!("…{}", &b.label[b.label.len() - 39..])
    } else {
        b.label.clone()
    };
    format!(
        "{bar} {:>8} {label} {}{}",
        b.activity,
        amount(b.done, b.total),
        rate(b)
    )
}

fn tenths(done: u64, total: Option<u64>) -> u64 {
    match total {
        Some(t) if t > 0 => (done.min(t) as u128 * 10 / t as u128) as u64,
        _ => 0,
    }
}

fn amount(done: u64, total: Option<u64>) -> String {
    match total {
        Some(t) if t > 0 => format!(
            "{} of {} ({:.0} %)",
            bytes(done),
            bytes(t),
            done.min(t) as f64 * 100.0 / t as f64
        ),
        _ => bytes(done),
    }
}

fn rate(b: &Bar) -> String {
    let secs = b.started.elapsed().as_secs_f64();
    if secs < 1.0 {
        return String::new();
    }
    format!(
        ", {}/s",
        bytes(((b.done - b.base.min(b.done)) as f64 / secs) as u64)
    )
}

/// Bytes in decimal units, as disk sizes are quoted.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit < UNITS.len() - 1 {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_disk_sizes() {
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(47_000_000_000), "47.0 GB");
        assert_eq!(amount(5, Some(10)), "5 B of 10 B (50 %)");
        assert_eq!(tenths(99, Some(100)), 9);
        assert_eq!(tenths(100, Some(100)), 10);
    }
}
