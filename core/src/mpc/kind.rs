//! The one table of frame tags of the product: a [`MsgKind`] per step of the engine and of the
//! conversion protocols above it (its discriminant is the tag), and a [`HostKind`] per frame of
//! the host's protocols (the key exchange, the model families' handshakes and reports). The
//! message structs that carry each engine kind, and the table of payload sizes, are in
//! [`super::msgs`]; the host's are in `veil-host`.

use core::fmt;

/// Declares a kind enum whose discriminants are the frame tags, its `ALL` list, `tag` and
/// `from_tag`, from one list (each kind once, in tag order, checked at compile time).
macro_rules! tag_table {
    ($(#[$edoc:meta])* $enum:ident { $($(#[$doc:meta])* $name:ident = $tag:literal,)* }) => {
        $(#[$edoc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        #[repr(u16)]
        pub enum $enum {
            $($(#[$doc])* $name = $tag,)*
        }

        impl $enum {
            /// Every kind, in tag order.
            pub const ALL: [$enum; [$($enum::$name),*].len()] = [$($enum::$name),*];

            /// The frame tag.
            pub const fn tag(self) -> u16 {
                self as u16
            }

            /// The kind with this tag, if any.
            pub fn from_tag(tag: u16) -> Option<$enum> {
                $enum::ALL.iter().copied().find(|k| k.tag() == tag)
            }
        }

        // The list is written in tag order, so `ALL` is in it too.
        const _: () = {
            let mut i = 1;
            while i < $enum::ALL.len() {
                assert!($enum::ALL[i - 1].tag() < $enum::ALL[i].tag());
                i += 1;
            }
        };
    };
}

tag_table! {
    /// Kind of a protocol message; its discriminant is the frame tag: the engine's part of the
    /// one table of tags (and the conversion protocols' above it).
    MsgKind {
    /// Setup round 1 (`SetupHello`): Chou–Orlandi `S` and the seed share.
    SetupHello = 0x0001,
    /// Setup round 2 (`BaseOtReply`): the 128 base-OT receiver points.
    BaseOtReply = 0x0002,
    /// Common-seed share alone (`SeedShare`), for parties with an injected OT.
    SeedShare = 0x0003,
    /// IKNP `u` matrix (`IknpU`).
    IknpU = 0x0101,
    /// Pool derandomization bits `r ⊕ r'` (`Derand`).
    Derand = 0x0103,
    /// Silent-OT extension: the GGM level messages and correction words of
    /// all `t` single-point COTs (`SilentSpcot`).
    SilentSpcot = 0x0104,
    /// Beaver opening `(x − a, y − b)` (`BeaverOpen`).
    BeaverOpen = 0x0201,
    /// Gilboa triple COT corrections (`TripleCorr`).
    TripleCorr = 0x0202,
    /// `KnownMsb` truncation COT corrections (`TruncCorr`).
    TruncCorr = 0x0203,
    /// Exact-rounding COT corrections (`RoundCorr`).
    RoundCorr = 0x0204,
    /// B2A COT corrections (`B2aCorr`).
    B2aCorr = 0x0205,
    /// Multiplexer COT corrections (`MuxCorr`).
    MuxCorr = 0x0206,
    /// Squaring cross-term COT corrections (`SquareCorr`).
    SquareCorr = 0x0207,
    /// Broadcast-product COT corrections, several per COT (`WideCorr`).
    WideCorr = 0x0208,
    /// Bounded squaring: the wrap-bit COT corrections P1 sends (`SquareWrapCorr`).
    SquareWrapCorr = 0x0209,
    /// Bounded-product COT corrections, sent by both (`MulCorr`).
    MulCorr = 0x020a,
    /// Millionaires' leaf tables (`CmpLeaf`).
    CmpLeaf = 0x0301,
    /// Millionaires' AND-tree openings (`CmpAnd`).
    CmpAnd = 0x0302,
    /// Input sharing: the peer's share (`InputShare`).
    Input = 0x0401,
    /// Opening: the sender's shares (`Reveal`).
    Reveal = 0x0402,
    /// C2M masked ciphertexts (`C2mCiphertexts`).
    C2mCiphertexts = 0x0501,
    /// M2C encrypted plaintext shares (`M2cCiphertexts`).
    M2cCiphertexts = 0x0502,
    /// Ring2Field B2A corrections over `Z_q` (`ExtB2aCorr`).
    ExtB2aCorr = 0x0601,
    /// Known-MSB Ring2Field corrections over `Z_q` (`ExtMsbCorr`).
    ExtMsbCorr = 0x0602,
    /// RLWE triples: the key owner's public key (`HeKey`).
    HeKey = 0x0701,
    /// RLWE triples: the key owner's encrypted shares (`HeUpload`).
    HeUpload = 0x0702,
    /// RLWE triples: the evaluator's flooded, switched answer (`HeReply`).
    HeReply = 0x0703,
    }
}

impl fmt::Display for MsgKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?} (tag {:#06x})", self.tag())
    }
}

tag_table! {
    /// Kind of a host frame: the key exchange, the model families' handshakes and reports. These
    /// frames travel outside the MPC engine (the host reads them before or after a protocol
    /// run), in tag ranges no [`MsgKind`] uses; they belong to this one table all the same, so
    /// that no two protocols of the product can share a tag.
    HostKind {
        /// Key exchange: the CKKS parameter set.
        Params = 0x0A01,
        /// Key exchange: the public key.
        PublicKey = 0x0A02,
        /// Key exchange: the evaluation keys.
        EvalKeys = 0x0A03,
        /// Key exchange: the server's acknowledgement.
        KeysAck = 0x0A04,
        /// A batch of ciphertexts (the FHE-only CNN run).
        Ciphertexts = 0x0A05,
        /// One ciphertext.
        Ciphertext = 0x0A06,
        /// BERT session: the client's hello.
        BertHello = 0x0B01,
        /// BERT session: the server's acceptance.
        BertAccept = 0x0B02,
        /// BERT session: the server's refusal.
        BertRefuse = 0x0B03,
        /// BERT session: the server's per-block report.
        BertReport = 0x0B04,
        /// CNN hybrid run: the plan's fingerprint, and its acceptance.
        CnnPlan = 0x0C01,
        /// CNN session: the client's hello.
        CnnHello = 0x0C02,
        /// CNN session: the server's acceptance.
        CnnAccept = 0x0C03,
        /// CNN session: the server's refusal.
        CnnRefuse = 0x0C04,
    }
}

#[cfg(test)]
mod table_tests {
    use super::{HostKind, MsgKind};

    /// Every tag of the product is unique: the engine's, the host's, and across the two.
    #[test]
    fn tags_are_unique_across_the_table() {
        let mut tags: alloc::vec::Vec<u16> = MsgKind::ALL.iter().map(|k| k.tag()).collect();
        tags.extend(HostKind::ALL.iter().map(|k| k.tag()));
        let n = tags.len();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), n, "two kinds share a tag");
        for k in HostKind::ALL {
            assert_eq!(HostKind::from_tag(k.tag()), Some(k));
            assert_eq!(MsgKind::from_tag(k.tag()), None, "{k:?}");
        }
    }
}
