//! The playground's request handler: any bytes as one HTTP request must
//! give a status (a refusal, or 200 where the page would simulate), never a
//! panic, a hang or a blow-up. Everything but the simulation runs: the head
//! read within the server's limits, Host and site checks, the query, and
//! the page's overrides loaded and resolved with every refusal (files,
//! tables, sizes, memory) — `Playground::dry_respond`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::OnceLock;

fn playground() -> &'static servesim::playground::Playground {
    static P: OnceLock<servesim::playground::Playground> = OnceLock::new();
    P.get_or_init(|| {
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml");
        let catalog = servesim::Catalog::builtin().expect("built-in catalogue");
        servesim::playground::Playground::new(&scenario, &["num_requests=200".into()], catalog).expect("quickstart")
    })
}

fuzz_target!(|data: &[u8]| {
    let status = playground().dry_respond(data);
    assert!((200..600).contains(&status), "status {status}");
});
