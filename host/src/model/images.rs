//! Image and label files: MNIST's IDX format (`idx3-ubyte` images, `idx1-ubyte` labels), raw or
//! gzip-compressed (`flate2`). Every malformed file gets [`ModelError::BadImages`] naming the
//! problem. The MNIST test set ships with Veil (`host/assets/mnist/`, CC BY-SA 3.0).

use super::ModelError;
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The MNIST test images (10,000 × 28 × 28, IDX, gzip).
pub const MNIST_TEST_IMAGES: &[u8] = include_bytes!("../../assets/mnist/t10k-images-idx3-ubyte.gz");
/// The MNIST test labels (IDX, gzip).
pub const MNIST_TEST_LABELS: &[u8] = include_bytes!("../../assets/mnist/t10k-labels-idx1-ubyte.gz");

/// Largest decompressed file accepted (a guard against decompression bombs): 256 MiB.
const MAX_BYTES: u64 = 256 << 20;

/// A set of images, `[n][c][h][w]` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// Images.
    pub count: usize,
    /// Channels per image.
    pub channels: usize,
    /// Height.
    pub height: usize,
    /// Width.
    pub width: usize,
    /// The pixels.
    pub pixels: Vec<u8>,
}

impl Images {
    /// Image `i` as `f64` in `[0, 1]` (pixel / 255), the models' input convention.
    pub fn unit(&self, i: usize) -> Vec<f64> {
        let sz = self.channels * self.height * self.width;
        self.pixels[i * sz..(i + 1) * sz]
            .iter()
            .map(|&p| p as f64 / 255.0)
            .collect()
    }

    /// The first `n` images (all when `n ≥ count`).
    pub fn take(&self, n: usize) -> Images {
        let n = n.min(self.count);
        let sz = self.channels * self.height * self.width;
        Images {
            count: n,
            pixels: self.pixels[..n * sz].to_vec(),
            ..*self
        }
    }

    /// `Err` unless the images are `channels × side × side`.
    pub fn check_shape(&self, channels: usize, side: usize) -> Result<(), ModelError> {
        if (self.channels, self.height, self.width) != (channels, side, side) {
            return Err(ModelError::BadImages {
                path: "images".into(),
                reason: format!(
                    "images are {}×{}×{}, the model takes {channels}×{side}×{side}",
                    self.channels, self.height, self.width
                ),
            });
        }
        Ok(())
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> ModelError {
    ModelError::BadImages {
        path: path.into(),
        reason: reason.into(),
    }
}

/// The bytes of a file or of a built-in name, gunzipped when they start with the gzip magic.
fn contents(path: &Path, raw: &[u8]) -> Result<Vec<u8>, ModelError> {
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(raw)
            .take(MAX_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| bad(path, format!("gzip: {e}")))?;
        if out.len() as u64 > MAX_BYTES {
            return Err(bad(path, "decompresses to more than 256 MiB"));
        }
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ModelError::MissingFile { path: path.into() }
        } else {
            ModelError::Io {
                path: path.into(),
                message: e.to_string(),
            }
        }
    })
}

fn be32(b: &[u8], at: usize) -> usize {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

/// Parses IDX images (`0x00000803`: u8, three dimensions).
pub fn parse_idx_images(path: &Path, raw: &[u8]) -> Result<Images, ModelError> {
    let b = contents(path, raw)?;
    if b.len() < 16 {
        return Err(bad(path, "too short for an IDX image header"));
    }
    let magic = be32(&b, 0);
    if magic != 0x0803 {
        return Err(bad(
            path,
            format!("IDX magic {magic:#010x}, expected 0x00000803 (u8 images, 3 dimensions)"),
        ));
    }
    let (n, h, w) = (be32(&b, 4), be32(&b, 8), be32(&b, 12));
    if n == 0 || h == 0 || w == 0 || h > 4096 || w > 4096 {
        return Err(bad(path, format!("implausible dimensions {n}×{h}×{w}")));
    }
    let want = n
        .checked_mul(h * w)
        .ok_or_else(|| bad(path, "dimensions overflow"))?;
    if b.len() - 16 != want {
        return Err(bad(
            path,
            format!(
                "{} pixel bytes for {n} images of {h}×{w} ({want} expected)",
                b.len() - 16
            ),
        ));
    }
    Ok(Images {
        count: n,
        channels: 1,
        height: h,
        width: w,
        pixels: b[16..].to_vec(),
    })
}

/// Parses IDX labels (`0x00000801`: u8, one dimension).
pub fn parse_idx_labels(path: &Path, raw: &[u8]) -> Result<Vec<u8>, ModelError> {
    let b = contents(path, raw)?;
    if b.len() < 8 {
        return Err(bad(path, "too short for an IDX label header"));
    }
    let magic = be32(&b, 0);
    if magic != 0x0801 {
        return Err(bad(
            path,
            format!("IDX magic {magic:#010x}, expected 0x00000801 (u8 labels)"),
        ));
    }
    let n = be32(&b, 4);
    if b.len() - 8 != n {
        return Err(bad(
            path,
            format!("{} label bytes, the header says {n}", b.len() - 8),
        ));
    }
    Ok(b[8..].to_vec())
}

/// Images from a file, or `mnist-test` for the built-in MNIST test set.
pub fn read_images(spec: &str) -> Result<Images, ModelError> {
    if spec == "mnist-test" {
        return parse_idx_images(&PathBuf::from("mnist-test"), MNIST_TEST_IMAGES);
    }
    let path = Path::new(spec);
    parse_idx_images(path, &read_file(path)?)
}

/// Labels from a file, or `mnist-test` for the built-in MNIST test labels.
pub fn read_labels(spec: &str) -> Result<Vec<u8>, ModelError> {
    if spec == "mnist-test" {
        return parse_idx_labels(&PathBuf::from("mnist-test"), MNIST_TEST_LABELS);
    }
    let path = Path::new(spec);
    parse_idx_labels(path, &read_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_mnist_test_set_reads() {
        let im = read_images("mnist-test").unwrap();
        assert_eq!((im.count, im.height, im.width), (10_000, 28, 28));
        let lb = read_labels("mnist-test").unwrap();
        assert_eq!(lb.len(), 10_000);
        assert_eq!(&lb[..8], &[7, 2, 1, 0, 4, 1, 4, 9]);
        assert!(lb.iter().all(|&l| l < 10));
        im.check_shape(1, 28).unwrap();
        assert!(im.check_shape(1, 32).is_err());
    }

    #[test]
    fn malformed_files_get_typed_errors() {
        let p = Path::new("x");
        assert!(parse_idx_images(p, b"").is_err());
        assert!(parse_idx_images(p, &[0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1]).is_err());
        assert!(parse_idx_images(p, &[0, 0, 8, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2]).is_err());
        assert!(parse_idx_images(p, &[0x1f, 0x8b, 1, 2, 3]).is_err());
        assert!(parse_idx_labels(p, &[0, 0, 8, 1, 0, 0, 0, 3, 1]).is_err());
        assert!(read_images("/nonexistent/file").is_err());
        let ok = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4];
        assert_eq!(parse_idx_images(p, &ok).unwrap().pixels, vec![1, 2, 3, 4]);
    }
}
