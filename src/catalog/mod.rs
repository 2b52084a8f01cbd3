//! The catalogue of LLM architectures and GPU profiles.
//!
//! The files shipped under `models/llm/`, `models/gpu/` and `models/engine/`
//! are compiled into the binary. At run time a `models/` folder (the current
//! directory's, or one named with `--models`) is read on top: a file there
//! replaces the built-in entry with the same file stem, and new files add
//! entries. Names are matched case-insensitively against the file stem
//! (`h100-sxm`) or the display name (`H100-SXM`); models and GPUs also answer
//! to their `aliases`.

pub mod engine;

pub use engine::EngineProfile;

use crate::error::ConfigError;
use crate::spec::{GpuSpec, LlmSpec};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/builtin_models.rs"));

/// Where a catalogue entry was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Compiled into the binary from the repository's `models/` folder.
    Builtin,
    /// Read from a file at run time.
    File(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin => write!(f, "built-in"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One catalogue entry.
#[derive(Debug, Clone)]
pub struct Entry<T> {
    /// File stem, the name scenarios use.
    pub key: String,
    /// The parsed specification.
    pub spec: T,
    /// Where it came from.
    pub origin: Origin,
}

/// All known LLMs, GPUs and engine profiles.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// LLM architectures by file stem.
    pub models: BTreeMap<String, Entry<LlmSpec>>,
    /// GPU profiles by file stem.
    pub gpus: BTreeMap<String, Entry<GpuSpec>>,
    /// Engine profiles (`engine.preset`) by file stem.
    pub engines: BTreeMap<String, Entry<EngineProfile>>,
    /// Files of the user's models folder that could not be read: left out,
    /// so that one broken file breaks only the commands that name it.
    pub broken: Vec<Broken>,
}

/// A catalogue file left out because it could not be read or parsed.
#[derive(Debug, Clone)]
pub struct Broken {
    /// `llm`, `gpu` or `engine`.
    pub kind: &'static str,
    /// Its file stem (the name a scenario would use).
    pub stem: String,
    /// What is wrong with it.
    pub error: ConfigError,
}

impl Catalog {
    /// The built-in catalogue only.
    pub fn builtin() -> Result<Self, ConfigError> {
        let mut c = Catalog::default();
        for (kind, stem, text) in BUILTIN {
            let origin = Origin::Builtin;
            let file = PathBuf::from(format!("models/{kind}/{stem}.toml"));
            c.insert(kind, stem, text, &file, origin)?;
        }
        Ok(c)
    }

    /// The built-in catalogue overlaid with the files of `dir` (a folder
    /// holding `llm/`, `gpu/` and/or `engine/`), if it exists.
    pub fn with_dir(dir: Option<&Path>) -> Result<Self, ConfigError> {
        let mut c = Self::builtin()?;
        let default_dir = Path::new("models");
        let dir = match dir {
            Some(d) => {
                if !d.is_dir() {
                    return Err(ConfigError::new(format!("models folder {} does not exist", d.display()))
                        .hint("pass a folder that holds llm/, gpu/ or engine/ subfolders of TOML files"));
                }
                d
            }
            None if default_dir.is_dir() => default_dir,
            None => return Ok(c),
        };
        for kind in ["llm", "gpu", "engine"] {
            let sub = dir.join(kind);
            let Ok(rd) = std::fs::read_dir(&sub) else { continue };
            let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            paths.retain(|p| p.extension().is_some_and(|e| e == "toml"));
            paths.sort();
            for p in paths {
                let stem = p.file_stem().unwrap_or_default().to_string_lossy().to_string();
                let read = std::fs::read_to_string(&p)
                    .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", p.display())).file(&p));
                if let Err(error) = read.and_then(|text| c.insert(kind, &stem, &text, &p, Origin::File(p.clone()))) {
                    c.broken.push(Broken { kind, stem: stem.to_ascii_lowercase(), error });
                }
            }
        }
        Ok(c)
    }

    fn insert(&mut self, kind: &str, stem: &str, text: &str, file: &Path, origin: Origin) -> Result<(), ConfigError> {
        let key = stem.to_ascii_lowercase();
        match kind {
            "llm" => {
                let spec: LlmSpec = parse_spec(text, file)?;
                spec.validate().map_err(|m| ConfigError::new(m).file(file))?;
                self.models.insert(key.clone(), Entry { key, spec, origin });
            }
            "gpu" => {
                let spec: GpuSpec = parse_spec(text, file)?;
                spec.validate().map_err(|m| ConfigError::new(m).file(file))?;
                self.gpus.insert(key.clone(), Entry { key, spec, origin });
            }
            _ => {
                let spec: EngineProfile = parse_spec(text, file)?;
                spec.validate().map_err(|m| {
                    ConfigError::new(m)
                        .file(file)
                        .hint("an engine profile takes [engine] and [cost] keys with a [sources] entry for each (docs/engines.md)")
                })?;
                self.engines.insert(key.clone(), Entry { key, spec, origin });
            }
        }
        Ok(())
    }

    /// Looks up an engine profile by file stem or display name.
    pub fn engine(&self, name: &str) -> Option<&Entry<EngineProfile>> {
        lookup(&self.engines, name, |s| &s.name)
    }

    /// The error of a broken `kind` file named `name` (by file stem), if any:
    /// what a command that needs it reports instead of "unknown".
    pub fn broken_error(&self, kind: &str, name: &str) -> Option<ConfigError> {
        let k = name.to_ascii_lowercase();
        self.broken.iter().find(|b| b.kind == kind && b.stem == k).map(|b| b.error.clone())
    }

    /// Looks up an LLM by file stem, display name or alias.
    pub fn model(&self, name: &str) -> Option<&Entry<LlmSpec>> {
        lookup(&self.models, name, |s| &s.name).or_else(|| alias(&self.models, name, |s| &s.aliases))
    }

    /// Looks up a GPU by file stem, display name or alias.
    pub fn gpu(&self, name: &str) -> Option<&Entry<GpuSpec>> {
        lookup(&self.gpus, name, |s| &s.name).or_else(|| alias(&self.gpus, name, |s| &s.aliases))
    }
}

fn lookup<'a, T>(
    map: &'a BTreeMap<String, Entry<T>>,
    name: &str,
    display: impl Fn(&T) -> &String,
) -> Option<&'a Entry<T>> {
    let k = name.to_ascii_lowercase();
    map.get(&k).or_else(|| map.values().find(|e| display(&e.spec).eq_ignore_ascii_case(name)))
}

fn alias<'a, T>(
    map: &'a BTreeMap<String, Entry<T>>,
    name: &str,
    aliases: impl Fn(&T) -> &Vec<String>,
) -> Option<&'a Entry<T>> {
    map.values().find(|e| aliases(&e.spec).iter().any(|a| a.eq_ignore_ascii_case(name)))
}

/// Parses a TOML text into `T`, turning errors into a located [`ConfigError`].
pub fn parse_spec<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::from_toml(&e, text, file))
}
