//! The playground's HTTP side: routes, URL decoding, and a few threads
//! serving requests from a `tiny_http` server bound to 127.0.0.1.
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

/// Threads answering requests.
const WORKERS: usize = 4;

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

/// A running playground server.
pub struct Handle {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
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
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
    }

    /// Stops serving and waits for the threads to finish their requests.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        for _ in 0..self.workers.len() {
            self.server.unblock();
        }
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.shutdown();
        }
    }
}

/// Whether a request's `Host` names this machine: a page elsewhere that
/// resolves its own name to 127.0.0.1 (DNS rebinding) is refused.
fn local_host(host: Option<&str>) -> bool {
    let Some(h) = host else { return true };
    let name = if h.starts_with('[') { h.split(']').next().map(|s| &s[1..]) } else { h.split(':').next() };
    matches!(name, Some("127.0.0.1" | "localhost" | "::1"))
}

/// Whether a request comes from the playground's own page or was typed by
/// the user (`Sec-Fetch-Site`, sent by browsers): another site's page
/// (an `<img src="http://127.0.0.1:8737/results?...">`) may not make it
/// simulate. Clients that send no such header (curl, tests) are let in.
fn same_site(fetch_site: Option<&str>) -> bool {
    matches!(fetch_site, None | Some("same-origin" | "none"))
}

/// Starts serving `pg` on 127.0.0.1:`port` (0: any free port) from a few
/// background threads; returns at once with the bound address.
pub fn serve(pg: Playground, port: u16) -> Result<Handle> {
    let server = tiny_http::Server::http(("127.0.0.1", port)).map_err(|e| {
        Error::from(
            crate::ConfigError::new(format!("cannot listen on 127.0.0.1:{port}: {e}"))
                .hint("pass another --port (0 picks a free one)"),
        )
    })?;
    let addr =
        server.server_addr().to_ip().ok_or_else(|| Error::Runtime("the playground server has no IP address".into()))?;
    let server = Arc::new(server);
    let pg = Arc::new(pg);
    let stopping = Arc::new(AtomicBool::new(false));
    let workers = (0..WORKERS)
        .map(|i| {
            let (server, pg, stopping) = (server.clone(), pg.clone(), stopping.clone());
            std::thread::Builder::new()
                .name(format!("playground-{i}"))
                .spawn(move || worker(&server, &pg, &stopping))
                .map_err(|e| Error::Runtime(format!("cannot start a server thread: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Handle { addr, server, stopping, workers })
}

fn worker(server: &tiny_http::Server, pg: &Playground, stopping: &AtomicBool) {
    loop {
        let req = match server.recv() {
            Ok(r) => r,
            Err(_) if stopping.load(Ordering::SeqCst) => return,
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
        };
        let header = |name: &str| {
            req.headers()
                .iter()
                .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str().to_string())
        };
        let reply = if !local_host(header("Host").as_deref()) {
            Reply::text(403, "the playground answers requests for 127.0.0.1 or localhost only")
        } else if !same_site(header("Sec-Fetch-Site").as_deref()) {
            Reply::text(403, "the playground answers its own page only, not requests from other sites")
        } else {
            pg.respond(req.method().as_str(), req.url())
        };
        let head = req.method() == &tiny_http::Method::Head;
        let mut resp = tiny_http::Response::from_data(if head { Vec::new() } else { reply.body.into_bytes() })
            .with_status_code(reply.status);
        let headers =
            std::iter::once(("Content-Type".to_string(), reply.content_type.to_string())).chain(reply.headers);
        for (k, v) in headers {
            if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                resp.add_header(h);
            }
        }
        let _ = req.respond(resp);
    }
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
        assert!(!local_host(Some("evil.example:8737")));
    }

    #[test]
    fn only_its_own_page() {
        assert!(same_site(None) && same_site(Some("same-origin")) && same_site(Some("none")));
        assert!(!same_site(Some("cross-site")) && !same_site(Some("same-site")));
    }
}
