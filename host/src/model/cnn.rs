//! CNN checkpoints: Orion's LeNet for MNIST (`arch = "orion-lenet"` in the safetensors
//! metadata), with BatchNorm folded and a quadratic (`quad`, FHE-only mode) or ReLU (`relu`,
//! the hybrid mode) activation. Veil ships both, trained here (`scripts/train_lenet.py`,
//! provenance in `host/assets/lenet/README.md`); `--model lenet` and `--model lenet-relu` name
//! them, and any other `.safetensors` file of the same architecture loads too.

use super::{ModelError, Tensors};
use safetensors::SafeTensors;
use std::path::Path;
use veil_core::cnn::{Conv2d, Layer, Linear, Network, Quadratic};

/// The LeNet with trained quadratic activations (99.17 % on the MNIST test set in `f64`).
pub const LENET_QUAD: &[u8] = include_bytes!("../../assets/lenet/lenet-quad.safetensors");
/// The LeNet with ReLU (99.25 %), for the hybrid mode.
pub const LENET_RELU: &[u8] = include_bytes!("../../assets/lenet/lenet-relu.safetensors");

/// The bytes of a built-in model (`lenet`, `lenet-relu`).
pub fn builtin(name: &str) -> Option<&'static [u8]> {
    match name {
        "lenet" | "lenet-quad" => Some(LENET_QUAD),
        "lenet-relu" => Some(LENET_RELU),
        _ => None,
    }
}

/// A built-in name or a path to a `.safetensors` file.
pub fn load(spec: &str) -> Result<Network, ModelError> {
    if let Some(b) = builtin(spec) {
        return parse_cnn(b, spec);
    }
    let path = Path::new(spec);
    if !path.exists() {
        return Err(ModelError::MissingFile { path: path.into() });
    }
    let file = if path.is_dir() {
        path.join("model.safetensors")
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ModelError::MissingFile { path: file.clone() }
        } else {
            ModelError::Io {
                path: file.clone(),
                message: e.to_string(),
            }
        }
    })?;
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    parse_cnn(&bytes, &name)
}

/// Parses a CNN checkpoint from bytes (the fuzzable entry point).
pub fn parse_cnn(bytes: &[u8], name: &str) -> Result<Network, ModelError> {
    let (_, meta) =
        SafeTensors::read_metadata(bytes).map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    let md = meta.metadata().clone().unwrap_or_default();
    let arch = md.get("arch").map(String::as_str).unwrap_or("");
    if arch != "orion-lenet" {
        return Err(ModelError::UnsupportedModel(format!(
            "architecture `{arch}` (this build reads `orion-lenet`)"
        )));
    }
    let act = md.get("activation").map(String::as_str).unwrap_or("");
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    let t = Tensors(st);
    let conv = |w: &str, b: &str, ci: usize, co: usize| -> Result<Conv2d, ModelError> {
        Conv2d::new(
            ci,
            co,
            5,
            2,
            2,
            t.get(w, &[co, ci, 5, 5])?,
            t.get(b, &[co])?,
        )
        .map_err(ModelError::Invalid)
    };
    let fc = |w: &str, b: &str, i: usize, o: usize| -> Result<Linear, ModelError> {
        Linear::new(i, o, t.get(w, &[o, i])?, t.get(b, &[o])?).map_err(ModelError::Invalid)
    };
    let activation = |k: &str| -> Result<Layer, ModelError> {
        match act {
            "quad" => {
                let c = t.get(k, &[3])?;
                Ok(Layer::Quad(
                    Quadratic::new(c[0], c[1], c[2]).map_err(ModelError::Invalid)?,
                ))
            }
            "relu" => Ok(Layer::Relu),
            other => Err(ModelError::UnsupportedModel(format!(
                "activation `{other}` (quad or relu expected)"
            ))),
        }
    };
    let net = Network {
        name: name.into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(conv("conv1.weight", "conv1.bias", 1, 32)?),
            activation("act1")?,
            Layer::Conv(conv("conv2.weight", "conv2.bias", 32, 64)?),
            activation("act2")?,
            Layer::Flatten,
            Layer::Linear(fc("fc1.weight", "fc1.bias", 3136, 512)?),
            activation("act3")?,
            Layer::Linear(fc("fc2.weight", "fc2.bias", 512, 10)?),
        ],
    };
    net.validate().map_err(ModelError::Invalid)?;
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::images::{read_images, read_labels};

    /// The Rust network reproduces the training script's `f64` logits (`golden.json`).
    #[test]
    fn builtin_lenets_match_the_golden_logits() {
        let golden: serde_json::Value =
            serde_json::from_str(include_str!("../../assets/lenet/golden.json")).unwrap();
        let im = read_images("mnist-test").unwrap();
        let idx: Vec<usize> = golden["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let x: Vec<f64> = idx.iter().flat_map(|&i| im.unit(i)).collect();
        for (name, key) in [("lenet", "quad"), ("lenet-relu", "relu")] {
            let net = load(name).unwrap();
            let got = net.reference(&x, idx.len()).unwrap();
            let want: Vec<f64> = golden[key]["logits"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
                .collect();
            let err = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-9, "{name}: {err}");
        }
        // And the labels agree with the golden file.
        let lb = read_labels("mnist-test").unwrap();
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(golden["labels"][k].as_u64().unwrap() as u8, lb[i]);
        }
    }

    #[test]
    fn bad_cnn_files_get_typed_errors() {
        assert!(matches!(
            parse_cnn(b"not a model", "x"),
            Err(ModelError::BadSafetensors(_))
        ));
        assert!(matches!(
            load("/nonexistent"),
            Err(ModelError::MissingFile { .. })
        ));
        // A tensor with the wrong shape.
        let mut tensors = std::collections::HashMap::new();
        let data = vec![0u8; 4 * 10];
        tensors.insert(
            "conv1.weight".to_string(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![10], &data).unwrap(),
        );
        let meta: std::collections::HashMap<String, String> = [
            ("arch".to_string(), "orion-lenet".to_string()),
            ("activation".to_string(), "quad".to_string()),
        ]
        .into_iter()
        .collect();
        let bytes = safetensors::serialize(&tensors, Some(meta.clone())).unwrap();
        assert!(matches!(
            parse_cnn(&bytes, "x"),
            Err(ModelError::BadTensor { .. })
        ));
        // An unknown architecture.
        let mut m2 = meta;
        m2.insert("arch".into(), "resnet".into());
        let bytes = safetensors::serialize(&tensors, Some(m2)).unwrap();
        assert!(matches!(
            parse_cnn(&bytes, "x"),
            Err(ModelError::UnsupportedModel(_))
        ));
        // A missing tensor.
        let empty: std::collections::HashMap<String, safetensors::tensor::TensorView> =
            std::collections::HashMap::new();
        let m3: std::collections::HashMap<String, String> = [
            ("arch".to_string(), "orion-lenet".to_string()),
            ("activation".to_string(), "quad".to_string()),
        ]
        .into_iter()
        .collect();
        let bytes = safetensors::serialize(&empty, Some(m3)).unwrap();
        assert!(matches!(
            parse_cnn(&bytes, "x"),
            Err(ModelError::MissingTensor { .. })
        ));
    }
}
