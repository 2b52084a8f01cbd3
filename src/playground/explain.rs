//! The playground's "Explain" panel: `servesim explain`'s answer for the
//! run on screen (docs/attribution.md).

/// The Explain panel of a run, as an HTML fragment.
pub(crate) fn explain_html(x: &std::result::Result<crate::explain::Explanation, String>) -> String {
    match x {
        Ok(x) => {
            let svg = crate::plot::to_svg(&crate::explain::figure(x))
                .map(|s| crate::plot::strip_font_face(&s).replacen("<svg ", "<svg class=\"chart\" ", 1))
                .unwrap_or_default();
            crate::explain::html(x, &svg).replacen("<h2 id=\"reading-it-backwards\">Reading it backwards</h2>", "", 1)
        }
        Err(e) => format!("<p class=\"note\">No explanation for this run: {}</p>", crate::html::esc(e)),
    }
}
