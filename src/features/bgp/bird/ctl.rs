//! A client for BIRD's control socket (docs/bgp-plan.md, section 4).
//!
//! Juneau speaks the socket itself instead of running `birdc`: no process per query,
//! and the reply keeps its codes, which `birdc` strips. The protocol is BIRD's stable
//! line format (`doc/reply_codes`): `DDDD-text` is a line with more to come, `DDDD
//! text` the last line of a reply, ` text` a continuation of the previous code, `+text`
//! a spontaneous printout (not part of any reply). The server greets with `0001`.
//!
//! Everything but [`connect`] works over any `Read + Write`, so the tests feed the
//! bytes captured from bird 2.0.12 (`testdata/*.raw`) without a daemon.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Read and write timeout of [`connect`]: BIRD answers from its main loop, so a
/// reply that takes longer means a stuck daemon, and the caller's sweep must go on.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// BIRD's own lines stop at 512 bytes (`CLI_LINE_SIZE`); anything far longer is not
/// BIRD, and reading it whole would let a stranger fill memory.
const LINE_MAX: usize = 64 * 1024;

/// Reply codes Juneau acts on (`doc/reply_codes`).
pub mod code {
    pub const OK: u16 = 0;
    pub const WELCOME: u16 = 1;
    pub const READING_CONFIGURATION: u16 = 2;
    pub const RECONFIGURED: u16 = 3;
    pub const RECONFIGURATION_IN_PROGRESS: u16 = 4;
    pub const RECONFIGURATION_QUEUED: u16 = 5;
    pub const RECONFIGURATION_IGNORED: u16 = 6;
    pub const SHUTDOWN_ORDERED: u16 = 7;
    pub const STATUS: u16 = 13;
    pub const CONFIGURATION_OK: u16 = 20;
    pub const CONFIGURATION_ERROR: u16 = 8002;
    pub const PARSE_ERROR: u16 = 9001;
}

/// Why a conversation with BIRD failed (not: BIRD said no; that is a [`Reply`]).
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("control socket {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    /// A timeout shows here as `WouldBlock` or `TimedOut`.
    #[error("control socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("control socket closed before the reply ended")]
    Closed,
    #[error("control socket: not a BIRD reply line: {0:?}")]
    Malformed(String),
    #[error("control socket: expected the 0001 welcome, got {0:?}")]
    Welcome(String),
    #[error("{0:?} cannot be sent to BIRD: {1}")]
    Argument(String, &'static str),
}

/// One reply: every line with its code (a continuation carries the code it
/// continues), in order; the last line is the one with a space after its code.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    pub lines: Vec<(u16, String)>,
}

impl Reply {
    /// The code of the last line: what the command came to.
    pub fn final_code(&self) -> Option<u16> {
        self.lines.last().map(|(c, _)| *c)
    }

    /// True when BIRD refused (8xxx run-time, 9xxx parse errors).
    pub fn is_error(&self) -> bool {
        self.final_code().is_some_and(|c| c >= 8000)
    }

    /// The first line with this code.
    pub fn text(&self, code: u16) -> Option<&str> {
        self.lines
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, t)| t.as_str())
    }

    /// The reply as `birdc` prints it (codes dropped, a code-0 line such as the empty
    /// end of `show protocols` not printed): the parsers' input, so they read the
    /// daemon's replies and an operator's `birdc` output alike.
    pub fn body(&self) -> String {
        let mut out = String::new();
        for (_, text) in self.lines.iter().filter(|(code, _)| *code != code::OK) {
            out.push_str(text);
            out.push('\n');
        }
        out
    }
}

/// What a `configure` or `configure check` came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Configured {
    /// `0003`, or `0020` for a check: done.
    Done,
    /// `0004`: accepted, protocols whose blocks changed are restarting (bird 2.0.12
    /// answers so to a changed peer block). The file is the speaker's now.
    InProgress,
    /// `0005`: another reconfiguration runs; this one follows it.
    Queued,
    /// Anything else (`8002 <file>:<line>:<col> <message>`, `0006` shutting down, ...):
    /// the last line's text, for `errors[]`.
    Refused(String),
}

impl Reply {
    /// Reads a `configure` / `configure check` reply.
    pub fn configured(&self) -> Configured {
        match self.lines.last() {
            Some((code::RECONFIGURED | code::CONFIGURATION_OK, _)) => Configured::Done,
            Some((code::RECONFIGURATION_IN_PROGRESS, _)) => Configured::InProgress,
            Some((code::RECONFIGURATION_QUEUED, _)) => Configured::Queued,
            Some((_, text)) => Configured::Refused(text.clone()),
            None => Configured::Refused(String::new()),
        }
    }
}

/// One open control connection. Commands are sequential: BIRD answers one at a time.
pub struct BirdCtl<S: Read + Write> {
    stream: BufReader<S>,
    /// The welcome line's text, e.g. `BIRD 2.0.12 ready.`
    pub welcome: String,
}

/// Connects to BIRD's socket with [`TIMEOUT`] on every read and write.
pub fn connect(path: &Path) -> Result<BirdCtl<UnixStream>, CtlError> {
    let stream = UnixStream::connect(path).map_err(|source| CtlError::Connect {
        path: path.display().to_string(),
        source,
    })?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    BirdCtl::new(stream)
}

impl<S: Read + Write> BirdCtl<S> {
    /// Takes a connected stream and reads the welcome, so a socket that is not
    /// BIRD's fails here and not on the first command.
    pub fn new(stream: S) -> Result<Self, CtlError> {
        let mut stream = BufReader::new(stream);
        let welcome = read_reply(&mut stream)?;
        match welcome.lines.as_slice() {
            [(code::WELCOME, text)] => Ok(Self {
                welcome: text.clone(),
                stream,
            }),
            _ => Err(CtlError::Welcome(welcome.body())),
        }
    }

    /// Sends one command line and reads its whole reply.
    pub fn command(&mut self, line: &str) -> Result<Reply, CtlError> {
        if line.contains(['\n', '\r']) {
            return Err(CtlError::Argument(line.into(), "one line only"));
        }
        let inner = self.stream.get_mut();
        inner.write_all(format!("{line}\n").as_bytes())?;
        inner.flush()?;
        read_reply(&mut self.stream)
    }

    /// Gives the stream back (the bed's capture tool reads what it recorded).
    pub fn into_inner(self) -> S {
        self.stream.into_inner()
    }

    /// `show status`: version, server time, last reboot, `0013 Daemon is up and running`.
    pub fn status(&mut self) -> Result<Reply, CtlError> {
        self.command("show status")
    }

    /// `show protocols all`: the sessions (`1002` rows, `1006` details).
    pub fn protocols_all(&mut self) -> Result<Reply, CtlError> {
        self.command("show protocols all")
    }

    /// `configure check "<path>"`: parses a file without applying it (`0020` or `8002`).
    pub fn configure_check(&mut self, path: &Path) -> Result<Reply, CtlError> {
        let quoted = quoted(path)?;
        self.command(&format!("configure check {quoted}"))
    }

    /// `configure`: re-reads the file BIRD was started with (`-c`), which the daemon
    /// has just renamed into place after a successful check.
    pub fn configure(&mut self) -> Result<Reply, CtlError> {
        self.command("configure")
    }

    /// `down`: BIRD withdraws its routes (Cease to each peer) and exits. Teardown asks
    /// through the socket rather than signalling a pid it may not own.
    pub fn down(&mut self) -> Result<Reply, CtlError> {
        self.command("down")
    }
}

/// A path as a BIRD string: BIRD's lexer has no escapes, so a `"` cannot be sent.
fn quoted(path: &Path) -> Result<String, CtlError> {
    let shown = path.display().to_string();
    let text = path
        .to_str()
        .ok_or_else(|| CtlError::Argument(shown.clone(), "not UTF-8"))?;
    if text.contains(['"', '\n', '\r']) {
        return Err(CtlError::Argument(shown, "a quote or newline in the path"));
    }
    Ok(format!("\"{text}\""))
}

/// Reads lines until one whose code is followed by a space.
fn read_reply<R: BufRead>(input: &mut R) -> Result<Reply, CtlError> {
    let mut reply = Reply::default();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        let n = input
            .by_ref()
            .take(LINE_MAX as u64)
            .read_until(b'\n', &mut raw)?;
        if n == 0 || raw.last() != Some(&b'\n') {
            return Err(if n >= LINE_MAX {
                CtlError::Malformed(format!("a line over {LINE_MAX} bytes"))
            } else {
                CtlError::Closed
            });
        }
        let line = String::from_utf8_lossy(&raw[..raw.len() - 1]);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        match parse_line(line)? {
            Parsed::Spontaneous => {}
            Parsed::Continuation(text) => match reply.lines.last() {
                Some((code, _)) => reply.lines.push((*code, text.to_string())),
                None => return Err(CtlError::Malformed(line.to_string())),
            },
            Parsed::Line { code, text, last } => {
                reply.lines.push((code, text.to_string()));
                if last {
                    return Ok(reply);
                }
            }
        }
    }
}

enum Parsed<'a> {
    /// `+...`: a log line the client asked to see (`echo`); never part of a reply.
    Spontaneous,
    Continuation(&'a str),
    Line {
        code: u16,
        text: &'a str,
        last: bool,
    },
}

fn parse_line(line: &str) -> Result<Parsed<'_>, CtlError> {
    if line.starts_with('+') {
        return Ok(Parsed::Spontaneous);
    }
    if let Some(text) = line.strip_prefix(' ') {
        return Ok(Parsed::Continuation(text));
    }
    let malformed = || CtlError::Malformed(line.to_string());
    let (digits, rest) = line.split_at_checked(4).ok_or_else(malformed)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    let code: u16 = digits.parse().map_err(|_| malformed())?;
    let last = match rest.as_bytes().first() {
        Some(b' ') => true,
        Some(b'-') => false,
        _ => return Err(malformed()),
    };
    Ok(Parsed::Line {
        code,
        text: &rest[1..],
        last,
    })
}

#[cfg(test)]
#[path = "ctl_tests.rs"]
mod tests;
