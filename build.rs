//! Embeds the shipped `models/` catalogue into the binary so that `servesim`
//! works from any directory; files on disk still override these at run time.
use std::{env, fs, path::Path};

fn main() {
    let root = env::var("CARGO_MANIFEST_DIR").unwrap();
    let mut out = String::from(
        "/// (kind, stem, TOML text) of every shipped model, GPU and engine file.\npub static BUILTIN: &[(&str, &str, &str)] = &[\n",
    );
    for kind in ["llm", "gpu", "engine"] {
        let dir = Path::new(&root).join("models").join(kind);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> =
            fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "toml"));
        files.sort();
        for p in files {
            println!("cargo:rerun-if-changed={}", p.display());
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            out += &format!("    ({kind:?}, {stem:?}, include_str!({:?})),\n", p.display().to_string());
        }
    }
    out += "];\n";
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("builtin_models.rs"), out).unwrap();
}
