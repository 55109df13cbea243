//! Image and label files: MNIST's IDX format (`idx3-ubyte` images, `idx1-ubyte` labels), raw or
//! gzip-compressed (`flate2`); CIFAR-10's binary batches (`data_batch_*.bin`, `test_batch.bin`:
//! a label byte and 3 × 32 × 32 pixels per record, images and labels in one file); and PNG files
//! (the `png` crate; 8-bit gray or RGB after expansion, alpha dropped; several files given
//! comma-separated must share one shape). Every malformed file gets [`ModelError::BadImages`]
//! naming the problem. The MNIST test set ships with Veil (`host/assets/mnist/`, CC BY-SA 3.0).

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

/// CIFAR-10's binary record: one label byte, then 3 × 32 × 32 pixel bytes (R, G, B planes).
const CIFAR_RECORD: usize = 1 + 3 * 32 * 32;

/// Parses a CIFAR-10 binary batch into its images (3 × 32 × 32) and labels.
pub fn parse_cifar_batch(path: &Path, raw: &[u8]) -> Result<(Images, Vec<u8>), ModelError> {
    let b = contents(path, raw)?;
    if b.is_empty() || !b.len().is_multiple_of(CIFAR_RECORD) {
        return Err(bad(
            path,
            format!(
                "{} bytes is not a whole number of CIFAR-10 records of {CIFAR_RECORD} bytes",
                b.len()
            ),
        ));
    }
    let n = b.len() / CIFAR_RECORD;
    let mut labels = Vec::with_capacity(n);
    let mut pixels = Vec::with_capacity(n * (CIFAR_RECORD - 1));
    for r in b.chunks_exact(CIFAR_RECORD) {
        if r[0] > 9 {
            return Err(bad(path, format!("label {} is not a CIFAR-10 class", r[0])));
        }
        labels.push(r[0]);
        pixels.extend_from_slice(&r[1..]);
    }
    Ok((
        Images {
            count: n,
            channels: 3,
            height: 32,
            width: 32,
            pixels,
        },
        labels,
    ))
}

/// Largest PNG side accepted.
const MAX_PNG_SIDE: u32 = 4096;

/// Decodes one PNG into `[c][h][w]` bytes: gray images give one channel, color images three
/// (palettes expanded, 16-bit samples reduced to 8, alpha dropped).
pub fn parse_png(path: &Path, raw: &[u8]) -> Result<Images, ModelError> {
    let limits = png::Limits {
        bytes: MAX_BYTES as usize,
    };
    let mut dec = png::Decoder::new_with_limits(std::io::Cursor::new(raw), limits);
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec
        .read_info()
        .map_err(|e| bad(path, format!("PNG: {e}")))?;
    let (w, h) = {
        let info = reader.info();
        (info.width, info.height)
    };
    if w == 0 || h == 0 || w > MAX_PNG_SIDE || h > MAX_PNG_SIDE {
        return Err(bad(
            path,
            format!("PNG of {w}×{h}: sides must be 1..={MAX_PNG_SIDE}"),
        ));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| bad(path, "PNG: the frame size overflows"))?;
    let mut buf = vec![0u8; size];
    let out = reader
        .next_frame(&mut buf)
        .map_err(|e| bad(path, format!("PNG: {e}")))?;
    let (w, h) = (out.width as usize, out.height as usize);
    let per = match out.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => {
            return Err(bad(path, "PNG: an unexpanded palette"));
        }
    };
    let channels = if per <= 2 { 1 } else { 3 };
    let mut pixels = vec![0u8; channels * h * w];
    for y in 0..h {
        let row = &buf[y * out.line_size..y * out.line_size + w * per];
        for x in 0..w {
            for c in 0..channels {
                pixels[(c * h + y) * w + x] = row[x * per + c];
            }
        }
    }
    Ok(Images {
        count: 1,
        channels,
        height: h,
        width: w,
        pixels,
    })
}

/// Whether a path names a file of the given extension (case-insensitive).
fn has_ext(path: &Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case(ext))
}

/// Images from `mnist-test` (the built-in MNIST test set), an IDX file, a CIFAR-10 binary batch
/// (`.bin`), or one or more PNG files (`a.png,b.png`, all of one shape).
pub fn read_images(spec: &str) -> Result<Images, ModelError> {
    if spec == "mnist-test" {
        return parse_idx_images(&PathBuf::from("mnist-test"), MNIST_TEST_IMAGES);
    }
    let parts: Vec<&str> = spec.split(',').filter(|s| !s.is_empty()).collect();
    if !parts.is_empty() && parts.iter().all(|p| has_ext(Path::new(p), "png")) {
        let mut all: Option<Images> = None;
        for p in parts {
            let path = Path::new(p);
            let im = parse_png(path, &read_file(path)?)?;
            match &mut all {
                None => all = Some(im),
                Some(a) => {
                    if (a.channels, a.height, a.width) != (im.channels, im.height, im.width) {
                        return Err(bad(
                            path,
                            format!(
                                "{}×{}×{}, unlike the first PNG's {}×{}×{}",
                                im.channels, im.height, im.width, a.channels, a.height, a.width
                            ),
                        ));
                    }
                    a.count += 1;
                    a.pixels.extend_from_slice(&im.pixels);
                }
            }
        }
        return all.ok_or_else(|| bad(Path::new(spec), "no image"));
    }
    let path = Path::new(spec);
    if has_ext(path, "bin") {
        return parse_cifar_batch(path, &read_file(path)?).map(|(im, _)| im);
    }
    parse_idx_images(path, &read_file(path)?)
}

/// Labels from `mnist-test` (the built-in MNIST test labels), an IDX file, or a CIFAR-10 binary
/// batch (`.bin`, whose records carry their labels).
pub fn read_labels(spec: &str) -> Result<Vec<u8>, ModelError> {
    if spec == "mnist-test" {
        return parse_idx_labels(&PathBuf::from("mnist-test"), MNIST_TEST_LABELS);
    }
    let path = Path::new(spec);
    if has_ext(path, "bin") {
        return parse_cifar_batch(path, &read_file(path)?).map(|(_, l)| l);
    }
    parse_idx_labels(path, &read_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG of `w × h` pixels of `color` with `samples` bytes per pixel.
    fn png_bytes(w: u32, h: u32, color: png::ColorType, px: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut e = png::Encoder::new(&mut out, w, h);
            e.set_color(color);
            e.set_depth(png::BitDepth::Eight);
            let mut wr = e.write_header().unwrap();
            wr.write_image_data(px).unwrap();
        }
        out
    }

    #[test]
    fn png_images_read_as_planes() {
        // 2 × 3 RGBA: the alpha is dropped and the channels become planes.
        let px: Vec<u8> = (0..24).collect();
        let im = parse_png(
            Path::new("t.png"),
            &png_bytes(2, 3, png::ColorType::Rgba, &px),
        )
        .unwrap();
        assert_eq!((im.count, im.channels, im.height, im.width), (1, 3, 3, 2));
        // Pixel (y = 1, x = 0) is bytes 8..12: R at plane 0, G at plane 1.
        assert_eq!(im.pixels[2], 8);
        assert_eq!(im.pixels[6 + 2], 9);
        let g = parse_png(
            Path::new("g.png"),
            &png_bytes(3, 1, png::ColorType::Grayscale, &[1, 2, 3]),
        )
        .unwrap();
        assert_eq!((g.channels, g.pixels.clone()), (1, vec![1, 2, 3]));
        // Truncated or foreign bytes get a typed error naming the file.
        let bytes = png_bytes(3, 1, png::ColorType::Grayscale, &[1, 2, 3]);
        for junk in [&bytes[..bytes.len() - 10], &b"not a png"[..]] {
            match parse_png(Path::new("bad.png"), junk) {
                Err(ModelError::BadImages { path, .. }) => assert_eq!(path, Path::new("bad.png")),
                other => panic!("expected BadImages, got {other:?}"),
            }
        }
    }

    #[test]
    fn cifar_batches_carry_images_and_labels() {
        let mut raw = Vec::new();
        for label in [3u8, 7] {
            raw.push(label);
            raw.extend((0..3072).map(|i| (i % 251) as u8));
        }
        let (im, lb) = parse_cifar_batch(Path::new("b.bin"), &raw).unwrap();
        assert_eq!((im.count, im.channels, im.height, im.width), (2, 3, 32, 32));
        assert_eq!(lb, vec![3, 7]);
        assert_eq!(im.pixels[3072 + 5], 5);
        assert!(parse_cifar_batch(Path::new("b.bin"), &raw[..3000]).is_err());
        raw[0] = 12;
        assert!(matches!(
            parse_cifar_batch(Path::new("b.bin"), &raw),
            Err(ModelError::BadImages { .. })
        ));
    }

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
