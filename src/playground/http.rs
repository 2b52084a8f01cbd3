//! The playground's HTTP side: routes, URL decoding, and a small HTTP/1.1
//! server on 127.0.0.1 with bounded request heads, per-connection
//! timeouts, a fixed pool of threads and a bounded queue of connections
//! ([`limits`]); one request per connection.
//!
//! Routes (all GET; HEAD too):
//! - `/`: the page, with the results of the state in the query;
//! - `/results?…`: the results alone (what the page's script swaps in);
//! - `/export.toml?…`: the scenario file of that state.
//!
//! The query: `set=KEY=VALUE` (repeatable) for the configuration on screen,
//! `pinned=1` and `pin=KEY=VALUE` (repeatable) for the pinned baseline.

use super::{Playground, State, page};
use crate::error::{Error, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Reply {
    fn new(status: u16, content_type: &'static str, body: String) -> Reply {
        Reply { status, content_type, headers: Vec::new(), body }
    }

    fn html(status: u16, body: String) -> Reply {
        Reply::new(status, "text/html; charset=utf-8", body)
    }

    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply::new(status, "text/plain; charset=utf-8", body.into())
    }

    fn header(mut self, k: &str, v: impl Into<String>) -> Reply {
        self.headers.push((k.to_string(), v.into()));
        self
    }

    /// A header's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Percent-decodes a query component (`+` is a space).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() => {
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes a query component.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-_.~".contains(&c) {
            out.push(c as char);
        } else {
            out += &format!("%{c:02X}");
        }
    }
    out
}

/// The decoded `key=value` pairs of a query string.
pub(super) fn query_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

fn error_reply(e: &Error, fragment: bool) -> Reply {
    let body = page::error_html(&e.to_string());
    let body = if fragment { body } else { page::bare_page("servesim playground: error", &body) };
    Reply::html(422, body).header("X-Servesim-Error", "1")
}

/// Answers one request; a panic inside becomes a 500 page, so no request
/// can take a server thread down.
pub(super) fn respond(pg: &Playground, method: &str, url: &str) -> Reply {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| route(pg, method, url))).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .map(|s| s.as_str())
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        Reply::html(500, page::error_html(&format!("internal error: {what} (please report it)")))
            .header("X-Servesim-Error", "1")
    })
}

fn route(pg: &Playground, method: &str, url: &str) -> Reply {
    if method != "GET" && method != "HEAD" {
        return Reply::text(405, "the playground answers GET only").header("Allow", "GET, HEAD");
    }
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let state = State::parse(query);
    let reply = match path {
        "/" | "/index.html" | "/results" if !pg.try_start() => {
            return Reply::text(503, "busy: other changes are being simulated; try again").header("Retry-After", "1");
        }
        "/" | "/index.html" => {
            let _done = Done(pg);
            let start = Instant::now();
            let results = pg.simulate(&state).and_then(|v| page::results_html(pg, &state, &v, start));
            Reply::html(200, page::page_html(pg, results.map_err(|e| e.to_string())))
        }
        "/results" => {
            let _done = Done(pg);
            let start = Instant::now();
            match pg.simulate(&state).and_then(|v| {
                let sim_ms = v.sim_ms;
                page::results_html(pg, &state, &v, start).map(|h| (h, sim_ms))
            }) {
                Ok((html, sim_ms)) => {
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    Reply::html(200, html)
                        .header("X-Servesim-Ms", format!("{ms:.1}"))
                        .header("Server-Timing", format!("sim;dur={sim_ms:.1}, total;dur={ms:.1}"))
                }
                Err(e) => error_reply(&e, true),
            }
        }
        "/export.toml" => match pg.export_toml(&state) {
            Ok(t) => {
                let name = pg.path().file_stem().map_or("scenario".into(), |s| s.to_string_lossy().to_string());
                let name: String =
                    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
                Reply::new(200, "application/toml; charset=utf-8", t)
                    .header("Content-Disposition", format!("attachment; filename=\"{name}-playground.toml\""))
            }
            Err(e) => Reply::text(422, e.to_string()).header("X-Servesim-Error", "1"),
        },
        "/favicon.ico" => Reply::text(204, ""),
        _ => Reply::text(404, format!("no page {path}: try /")),
    };
    reply.header("Cache-Control", "no-store").header("X-Content-Type-Options", "nosniff")
}

/// Marks a simulation as finished when dropped (also on a panic).
struct Done<'a>(&'a Playground);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Playground {
    /// Counts a simulation in, unless [`super::MAX_IN_FLIGHT`] are running.
    fn try_start(&self) -> bool {
        let n = self.in_flight.fetch_add(1, Ordering::SeqCst);
        if n >= super::MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }
}

/// Limits of the HTTP layer: no client can grow the server or hold its
/// threads (a hostile tester grew it to 2 GB with one endless header and
/// held 5,005 threads with 5,000 half-open connections under tiny_http).
pub mod limits {
    /// Longest request line (method, path and query, version), bytes.
    pub const MAX_REQUEST_LINE: usize = 16 * 1024;
    /// Most bytes of the request line and headers together.
    pub const MAX_HEAD: usize = 32 * 1024;
    /// Most header lines.
    pub const MAX_HEADERS: usize = 64;
    /// Threads answering connections (a fixed pool: no thread per connection).
    pub const WORKERS: usize = 8;
    /// Accepted connections waiting for a thread; more are closed at once.
    pub const QUEUE: usize = 32;
    /// Time a client has to send its whole request head, s.
    pub const HEAD_TIMEOUT_S: f64 = 10.0;
    /// Time one read or write may block, s.
    pub const IO_TIMEOUT_S: f64 = 5.0;
}

/// A running playground server.
pub struct Handle {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Handle {
    /// The address it listens on (127.0.0.1 and the port it got).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Serves until the server is stopped (for `servesim playground`: until
    /// the process ends).
    pub fn wait(mut self) {
        for w in std::mem::take(&mut self.threads) {
            let _ = w.join();
        }
    }

    /// Stops serving and waits for the threads to finish their requests.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accepting thread; it closes the queue and the workers end.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, std::time::Duration::from_secs(1));
        for w in std::mem::take(&mut self.threads) {
            let _ = w.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shutdown();
        }
    }
}

/// Whether a request's `Host` names this machine, exactly: `127.0.0.1`,
/// `localhost` or `[::1]`, with an optional numeric port. A page elsewhere
/// that resolves its own name to 127.0.0.1 (DNS rebinding) is refused, and
/// so are a missing or empty Host and anything after the name
/// (`[::1]evil.example`).
fn local_host(host: Option<&str>) -> bool {
    let Some(h) = host.map(str::trim) else { return false };
    let (name, port) = if let Some(rest) = h.strip_prefix('[') {
        let Some((name, after)) = rest.split_once(']') else { return false };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(p),
                None => return false,
            },
        };
        (name, port)
    } else {
        match h.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (h, None),
        }
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && matches!(name, "127.0.0.1" | "localhost" | "::1")
}

/// Whether a request comes from the playground's own page or was typed by
/// the user (`Sec-Fetch-Site`, sent by browsers): another site's page
/// (an `<img src="http://127.0.0.1:8737/results?...">`) may not make it
/// simulate. Clients that send no such header (curl, tests) are let in.
fn same_site(fetch_site: Option<&str>) -> bool {
    matches!(fetch_site, None | Some("same-origin" | "none"))
}

/// Starts serving `pg` on 127.0.0.1:`port` (0: any free port) from a fixed
/// pool of threads; returns at once with the bound address.
pub fn serve(pg: Playground, port: u16) -> Result<Handle> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
        Error::from(
            crate::ConfigError::new(format!("cannot listen on 127.0.0.1:{port}: {e}"))
                .hint("pass another --port (0 picks a free one)"),
        )
    })?;
    let addr =
        listener.local_addr().map_err(|e| Error::Runtime(format!("the playground server has no address: {e}")))?;
    let pg = Arc::new(pg);
    let stopping = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::net::TcpStream>(limits::QUEUE);
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .map_err(|e| Error::Runtime(format!("cannot start a server thread: {e}")))
    };
    let mut threads = Vec::new();
    for i in 0..limits::WORKERS {
        let (rx, pg) = (rx.clone(), pg.clone());
        threads.push(spawn(
            format!("playground-{i}"),
            Box::new(move || {
                loop {
                    let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(stream) = next else { return };
                    answer(stream, &pg);
                }
            }),
        )?);
    }
    let stop = stopping.clone();
    threads.push(spawn(
        "playground-accept".into(),
        Box::new(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                match tx.try_send(stream) {
                    Ok(()) => {}
                    // Every thread busy and the queue full: say so and close.
                    Err(std::sync::mpsc::TrySendError::Full(mut s)) => {
                        let _ = s.set_write_timeout(Some(std::time::Duration::from_millis(200)));
                        let _ = write_reply(
                            &mut s,
                            &Reply::text(503, "busy: too many connections").header("Retry-After", "1"),
                            false,
                        );
                    }
                    Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return,
                }
            }
        }),
    )?);
    Ok(Handle { addr, stopping, threads })
}

/// A request head as read: method, target and headers.
#[derive(Debug, PartialEq)]
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads a request head from `r` within [`limits`]: the status to answer
/// with instead when it breaks one (400 malformed, 408 too slow, 414 request
/// line too long, 431 headers too large).
fn read_head(r: &mut impl std::io::BufRead, deadline: Instant) -> std::result::Result<Head, u16> {
    let mut total = 0usize;
    let mut line = Vec::new();
    let mut next_line = |max: usize, total: &mut usize, too_long: u16| -> std::result::Result<String, u16> {
        line.clear();
        loop {
            if Instant::now() > deadline {
                return Err(408);
            }
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Err(408);
                }
                Err(_) => return Err(400),
            };
            if buf.is_empty() {
                return Err(400);
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            line.extend_from_slice(&buf[..take]);
            r.consume(take);
            *total += take;
            if line.len() > max {
                return Err(too_long);
            }
            if *total > limits::MAX_HEAD {
                return Err(431);
            }
            if done {
                let text = std::str::from_utf8(&line).map_err(|_| 400u16)?;
                return Ok(text.trim_end_matches(['\r', '\n']).to_string());
            }
        }
    };
    let request = next_line(limits::MAX_REQUEST_LINE, &mut total, 414)?;
    let mut parts = request.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(400);
    }
    let mut headers = Vec::new();
    loop {
        let h = next_line(limits::MAX_HEAD, &mut total, 431)?;
        if h.is_empty() {
            break;
        }
        if headers.len() == limits::MAX_HEADERS {
            return Err(431);
        }
        let Some((k, v)) = h.split_once(':') else { return Err(400) };
        if k.is_empty() || k.contains([' ', '\t']) {
            return Err(400);
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    Ok(Head { method: method.to_string(), target: target.to_string(), headers })
}

/// [`Playground::dry_respond`].
pub(super) fn dry_respond(pg: &Playground, request: &[u8]) -> u16 {
    let far = Instant::now() + std::time::Duration::from_secs(3600);
    let h = match read_head(&mut std::io::BufReader::new(request), far) {
        Ok(h) => h,
        Err(status) => return status,
    };
    if !local_host(h.header("Host")) || !same_site(h.header("Sec-Fetch-Site")) {
        return 403;
    }
    let (path, query) = h.target.split_once('?').unwrap_or((&h.target, ""));
    let state = State::parse(query);
    let check = |sets: &[String]| pg.load(sets).map_err(Error::from).and_then(|l| pg.resolve(&l).map_err(Error::from));
    match (h.method.as_str(), path) {
        ("GET" | "HEAD", "/" | "/index.html" | "/results") => {
            let ok = check(&state.sets).is_ok() && state.baseline.as_ref().is_none_or(|b| check(b).is_ok());
            if ok { 200 } else { 422 }
        }
        ("GET" | "HEAD", "/export.toml") => {
            if pg.export_toml(&state).is_ok() {
                200
            } else {
                422
            }
        }
        (m, p) => route(pg, m, p).status,
    }
}

/// Answers one connection: one request, then the connection closes.
fn answer(mut stream: std::net::TcpStream, pg: &Playground) {
    let io = std::time::Duration::from_secs_f64(limits::IO_TIMEOUT_S);
    let _ = stream.set_read_timeout(Some(io));
    let _ = stream.set_write_timeout(Some(io));
    let deadline = Instant::now() + std::time::Duration::from_secs_f64(limits::HEAD_TIMEOUT_S);
    let Ok(read) = stream.try_clone() else { return };
    let mut reader = std::io::BufReader::with_capacity(8192, read);
    let (reply, head) = match read_head(&mut reader, deadline) {
        Err(status) => (Reply::text(status, reason(status)), false),
        Ok(h) => {
            let reply = if !local_host(h.header("Host")) {
                Reply::text(403, "the playground answers requests for 127.0.0.1 or localhost only")
            } else if !same_site(h.header("Sec-Fetch-Site")) {
                Reply::text(403, "the playground answers its own page only, not requests from other sites")
            } else if h.header("Content-Length").is_some_and(|l| l.trim() != "0")
                || h.header("Transfer-Encoding").is_some()
            {
                Reply::text(413, "the playground takes no request body")
            } else {
                pg.respond(&h.method, &h.target)
            };
            (reply, h.method == "HEAD")
        }
    };
    let _ = write_reply(&mut stream, &reply, head);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Writes `reply` as an HTTP/1.1 response that closes the connection (no
/// body for HEAD). Header values with line breaks are dropped.
fn write_reply(w: &mut impl std::io::Write, reply: &Reply, head: bool) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        if !k.contains(['\r', '\n', ':']) && !v.contains(['\r', '\n']) {
            out += &format!("{k}: {v}\r\n");
        }
    }
    out += "\r\n";
    w.write_all(out.as_bytes())?;
    if !head {
        w.write_all(reply.body.as_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_round_trip() {
        let s = State {
            sets: vec!["workload.rate=12.5".into(), "engine.preset=\"vllm-v1\"".into(), "a b=c&d%".into()],
            baseline: Some(vec![]),
        };
        assert_eq!(State::parse(&s.query()), s);
        assert_eq!(decode("a+b%3Dc%"), "a b=c%");
        assert!(State::parse("").baseline.is_none());
    }

    #[test]
    fn only_local_hosts() {
        assert!(local_host(Some("127.0.0.1:8737")) && local_host(Some("localhost")) && local_host(Some("[::1]:80")));
        assert!(local_host(Some("[::1]")) && local_host(Some("localhost:1")));
        for bad in ["evil.example:8737", "[::1]evil.example", "", "127.0.0.1:", "127.0.0.1:80x", "[::1]:", "[::1"] {
            assert!(!local_host(Some(bad)), "{bad:?} was taken for a local host");
        }
        assert!(!local_host(None), "a request without Host was accepted");
    }

    #[test]
    fn request_heads_are_bounded() {
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let read = |text: &[u8]| read_head(&mut std::io::BufReader::new(text), far);
        let h = read(b"GET /results?set=a HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n").unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str(), h.header("host")),
            ("GET", "/results?set=a", Some("127.0.0.1:1"))
        );
        let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(limits::MAX_REQUEST_LINE));
        assert_eq!(read(long_line.as_bytes()), Err(414));
        let endless = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(limits::MAX_HEAD + 10));
        assert_eq!(read(endless.as_bytes()), Err(431));
        let many: String = (0..=limits::MAX_HEADERS).map(|i| format!("X{i}: 1\r\n")).collect();
        assert_eq!(read(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()), Err(431));
        for bad in [
            &b"GET /\r\n\r\n"[..],
            b"GET / HTTP/1.1 x\r\n\r\n",
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            b"GET / HTTP/1.1\r\n",
        ] {
            assert_eq!(read(bad), Err(400), "{}", String::from_utf8_lossy(bad));
        }
        let past = Instant::now() - std::time::Duration::from_secs(1);
        assert_eq!(read_head(&mut std::io::BufReader::new(&b"GET / HTTP/1.1\r\n\r\n"[..]), past), Err(408));
    }

    #[test]
    fn only_its_own_page() {
        assert!(same_site(None) && same_site(Some("same-origin")) && same_site(Some("none")));
        assert!(!same_site(Some("cross-site")) && !same_site(Some("same-site")));
    }
}
