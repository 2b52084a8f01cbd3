//! HTML text shared by the pages servesim writes or serves: the report
//! ([`crate::export`]), its explanation section ([`crate::explain`]) and the
//! playground ([`crate::playground`]). It imports nothing of theirs.

/// Escapes text for HTML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
