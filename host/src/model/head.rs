//! The sentiment head on the mean-pooled encoder output (384 → 2 for all-MiniLM-L6-v2), its
//! file format, its training data and its training.
//!
//! **Data.** The UCI "Sentiment Labelled Sentences" (Kotzias et al., KDD 2015; CC BY 4.0):
//! 1,000 Amazon, 1,000 IMDb and 1,000 Yelp sentences labelled 0 (negative) or 1 (positive), as
//! shipped in the npm package `sentiment@5.0.2` (`test/fixtures/{amazon,imdb,yelp}.json`, a JSON
//! array of `{"text", "class"}` ending in an empty sentinel entry).
//!
//! **Split.** Deterministic: in each file, the sentences at indices `i ≡ 9 (mod 10)` are held
//! out (100 per file, 300 in all); training never sees them. The held-out sentences are
//! committed with Veil (`host/assets/uci-sentiment-heldout.json`, with their attribution) so
//! that the accuracy test runs without the network.
//!
//! **Model.** L2-regularised logistic regression on the raw mean-pooled features (no
//! standardisation: a few MiniLM dimensions are near zero, and standardising them gives weights
//! near 10⁷ that fixed point cannot carry). One logit `z = w·x + c` is fitted by Newton's method
//! on `mean(log(1 + e^{−(2y−1)z})) + λ/2·‖w‖²` (the bias is not penalised); the head file holds
//! it as two classes, `W = [−w/2, w/2]`, `b = [−c/2, c/2]`, so that `logit₁ − logit₀ = z` and the
//! softmax of the two logits is the sigmoid of `z`. `λ` is chosen by 5-fold cross-validation
//! on the training part only.

use serde::{Deserialize, Serialize};
use veil_core::bert::Head;
use veil_core::packing::Mat;

use super::ModelError;

/// The head committed with Veil, trained by `scripts/train-head.sh` on all-MiniLM-L6-v2.
pub const DEFAULT_HEAD_JSON: &str = include_str!("../../assets/minilm-sentiment-head.json");

/// The held-out UCI sentences (CC BY 4.0), committed by the training program.
pub const HELDOUT_JSON: &str = include_str!("../../assets/uci-sentiment-heldout.json");

/// The class names of the sentiment head.
pub const LABELS: [&str; 2] = ["negative", "positive"];

/// One labelled sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sentence {
    /// The text.
    pub text: String,
    /// 0 (negative) or 1 (positive).
    pub label: u8,
    /// Which file it came from (`amazon`, `imdb`, `yelp`).
    pub source: String,
    /// Its index in that file.
    pub index: usize,
}

/// A head file (`host/assets/minilm-sentiment-head.json`, or `veil-head.json` in a model
/// directory): the weights and how they were made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadFile {
    /// `d` rows of `classes` weights (`in × out`).
    pub w: Vec<Vec<f64>>,
    /// `classes` biases.
    pub b: Vec<f64>,
    /// Class names.
    #[serde(default)]
    pub labels: Vec<String>,
    /// The encoder the head was fitted on.
    #[serde(default)]
    pub model: String,
    /// Where the training data came from.
    #[serde(default)]
    pub data_source: String,
    /// The held-out rule.
    #[serde(default)]
    pub split: String,
    /// The L2 weight `λ`.
    #[serde(default)]
    pub l2: f64,
    /// Training sentences.
    #[serde(default)]
    pub train_size: usize,
    /// Held-out sentences.
    #[serde(default)]
    pub heldout_size: usize,
    /// Plaintext (f64) accuracy on the training part.
    #[serde(default)]
    pub train_accuracy: f64,
    /// Plaintext (f64) accuracy on the held-out part.
    #[serde(default)]
    pub heldout_accuracy: f64,
}

impl HeadFile {
    /// The head as `veil-core` holds it, checked against the width `d`.
    pub fn to_head(&self, d: usize) -> Result<Head, ModelError> {
        let classes = self.b.len();
        if classes < 2 {
            return Err(ModelError::BadHead(format!(
                "{classes} classes (at least 2 needed)"
            )));
        }
        if self.w.len() != d {
            return Err(ModelError::BadHead(format!(
                "{} weight rows for an encoder of width {d}",
                self.w.len()
            )));
        }
        let mut data = Vec::with_capacity(d * classes);
        for (r, row) in self.w.iter().enumerate() {
            if row.len() != classes {
                return Err(ModelError::BadHead(format!(
                    "weight row {r} has {} entries, expected {classes}",
                    row.len()
                )));
            }
            data.extend_from_slice(row);
        }
        if data.iter().chain(&self.b).any(|v| !v.is_finite()) {
            return Err(ModelError::BadHead("non-finite weight".into()));
        }
        Ok(Head {
            w: Mat {
                rows: d,
                cols: classes,
                data,
            },
            b: self.b.clone(),
        })
    }
}

/// Parses a head file for an encoder of width `d`.
pub fn parse_head(bytes: &[u8], d: usize) -> Result<Head, ModelError> {
    let f: HeadFile =
        serde_json::from_slice(bytes).map_err(|e| ModelError::BadHead(e.to_string()))?;
    f.to_head(d)
}

/// The committed head's metadata and weights.
pub fn default_head_file() -> Result<HeadFile, ModelError> {
    serde_json::from_str(DEFAULT_HEAD_JSON).map_err(|e| ModelError::BadHead(e.to_string()))
}

/// The committed all-MiniLM-L6-v2 sentiment head (`d` must be 384).
pub fn default_head(d: usize) -> Result<Head, ModelError> {
    default_head_file()?.to_head(d).map_err(|e| {
        ModelError::BadHead(format!(
            "the built-in head is for all-MiniLM-L6-v2 (width 384); put a {} in the model \
             directory ({e})",
            super::HEAD_FILE
        ))
    })
}

#[derive(Deserialize)]
struct FixtureEntry {
    text: Option<String>,
    class: Option<u8>,
}

/// Parses one fixture of `sentiment@5.0.2` (`[{"text": …, "class": 0|1}, …]`), skipping entries
/// without a class or text (each file ends in such a sentinel).
pub fn parse_fixture(bytes: &[u8], source: &str) -> Result<Vec<Sentence>, ModelError> {
    let entries: Vec<FixtureEntry> =
        serde_json::from_slice(bytes).map_err(|e| ModelError::BadHead(format!("{source}: {e}")))?;
    let mut out = Vec::new();
    for (index, e) in entries.into_iter().enumerate() {
        match (e.text, e.class) {
            (Some(t), Some(c @ (0 | 1))) if !t.trim().is_empty() => out.push(Sentence {
                text: t.trim().to_string(),
                label: c,
                source: source.to_string(),
                index,
            }),
            (Some(t), None) if t.trim().is_empty() => {}
            (None, None) => {}
            (_, c) => {
                return Err(ModelError::BadHead(format!(
                    "{source}[{index}]: bad entry (class {c:?})"
                )))
            }
        }
    }
    Ok(out)
}

/// The held-out rule: index `≡ 9 (mod 10)` within its file.
pub fn is_heldout(s: &Sentence) -> bool {
    s.index % 10 == 9
}

/// The split rule, as written into the head file.
pub const SPLIT_RULE: &str =
    "held out: the sentences at index i = 9 (mod 10) of each of amazon, imdb, yelp (300)";

/// The committed held-out sentences.
pub fn heldout() -> Result<Vec<Sentence>, ModelError> {
    serde_json::from_str(HELDOUT_JSON).map_err(|e| ModelError::BadHead(e.to_string()))
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Solves `A·x = b` for a symmetric positive-definite `A` (`n × n`, row-major) by Cholesky.
fn cholesky_solve(a: &[f64], b: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i * n + k] * y[k]).sum::<f64>()) / l[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k * n + i] * x[k]).sum::<f64>()) / l[i * n + i];
    }
    Some(x)
}

/// Fits `z = w·x + c` by Newton's method on the mean logistic loss plus `λ/2·‖w‖²`
/// (`λ > 0`; the bias is not penalised). Returns `(w, c)`.
pub fn fit_logistic(x: &[Vec<f64>], y: &[u8], l2: f64) -> (Vec<f64>, f64) {
    let d = x.first().map_or(0, |r| r.len());
    let n = d + 1;
    let m = x.len().max(1) as f64;
    let mut theta = vec![0.0; n];
    for _ in 0..50 {
        let mut g = vec![0.0; n];
        let mut h = vec![0.0; n * n];
        for (xi, &yi) in x.iter().zip(y) {
            let z = xi.iter().zip(&theta).map(|(a, t)| a * t).sum::<f64>() + theta[d];
            let p = sigmoid(z);
            let r = (p - yi as f64) / m;
            let s = p * (1.0 - p) / m;
            for j in 0..d {
                g[j] += r * xi[j];
            }
            g[d] += r;
            for j in 0..n {
                let xj = if j < d { xi[j] } else { 1.0 };
                let sx = s * xj;
                for k in 0..=j {
                    let xk = if k < d { xi[k] } else { 1.0 };
                    h[j * n + k] += sx * xk;
                }
            }
        }
        for j in 0..n {
            for k in 0..j {
                h[k * n + j] = h[j * n + k];
            }
        }
        for j in 0..d {
            g[j] += l2 * theta[j];
            h[j * n + j] += l2;
        }
        h[d * n + d] += 1e-12;
        let Some(step) = cholesky_solve(&h, &g, n) else {
            break;
        };
        let mut norm = 0.0;
        for (t, s) in theta.iter_mut().zip(&step) {
            *t -= s;
            norm += s * s;
        }
        if norm.sqrt() < 1e-10 {
            break;
        }
    }
    let c = theta.pop().unwrap_or(0.0);
    (theta, c)
}

/// Accuracy of `z = w·x + c` (class 1 when `z > 0`).
pub fn accuracy(x: &[Vec<f64>], y: &[u8], w: &[f64], c: f64) -> f64 {
    let ok = x
        .iter()
        .zip(y)
        .filter(|(xi, &yi)| {
            let z = xi.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() + c;
            (z > 0.0) == (yi == 1)
        })
        .count();
    ok as f64 / x.len().max(1) as f64
}

/// The two-class head of a single logit: `W = [−w/2, w/2]`, `b = [−c/2, c/2]`.
pub fn two_class(w: &[f64], c: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    (
        w.iter().map(|v| vec![-v / 2.0, v / 2.0]).collect(),
        vec![-c / 2.0, c / 2.0],
    )
}

/// The predicted class of two-or-more logits (the first maximum).
pub fn argmax(logits: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in logits.iter().enumerate() {
        if *v > logits[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_parsing_skips_the_sentinel_and_rejects_bad_classes() {
        let s = parse_fixture(
            br#"[{"text":"Good.","class":1},{"text":" Bad. ","class":0},{"text":"","class":null}]"#,
            "yelp",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].text.as_str(), s[1].label, s[1].index), ("Bad.", 0, 1));
        assert!(parse_fixture(br#"[{"text":"x","class":3}]"#, "a").is_err());
        assert!(parse_fixture(b"{", "a").is_err());
    }

    #[test]
    fn logistic_regression_separates_and_is_regularised() {
        // Two Gaussian-ish clouds on a line, deterministic.
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..200 {
            let t = (i as f64 * 0.618).fract() - 0.5;
            let lab = (i % 2) as u8;
            x.push(vec![
                t + if lab == 1 { 1.0 } else { -1.0 },
                0.3 * t,
                1e-6 * t,
            ]);
            y.push(lab);
        }
        let (w, c) = fit_logistic(&x, &y, 1e-3);
        assert_eq!(accuracy(&x, &y, &w, c), 1.0);
        // The gradient vanishes at the optimum.
        let m = x.len() as f64;
        for j in 0..3 {
            let g: f64 = x
                .iter()
                .zip(&y)
                .map(|(xi, &yi)| {
                    let z = xi.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() + c;
                    (sigmoid(z) - yi as f64) * xi[j] / m
                })
                .sum::<f64>()
                + 1e-3 * w[j];
            assert!(g.abs() < 1e-9, "{g}");
        }
        // The near-zero feature gets a bounded weight (no standardisation blow-up).
        assert!(w[2].abs() < 1.0);
        let (hw, hb) = two_class(&w, c);
        assert_eq!(hw[0], vec![-w[0] / 2.0, w[0] / 2.0]);
        assert_eq!(hb, vec![-c / 2.0, c / 2.0]);
    }

    #[test]
    fn committed_head_and_heldout_parse() {
        let f = default_head_file().unwrap();
        let h = f.to_head(384).unwrap();
        assert_eq!((h.w.rows, h.w.cols), (384, 2));
        assert!(default_head(128).is_err());
        let held = heldout().unwrap();
        assert!(held.len() >= 300);
        assert!(held.iter().all(is_heldout));
        assert!(parse_head(b"{\"w\": [[1.0]], \"b\": [0.0]}", 1).is_err());
        assert!(parse_head(b"{\"w\": [[1.0, 2.0]], \"b\": [0.0, 0.0]}", 1).is_ok());
        assert!(parse_head(b"[", 1).is_err());
    }
}
