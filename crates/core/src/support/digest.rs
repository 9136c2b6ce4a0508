//! Digests and their text form: one hex encoder, and the FNV-1a hash used where a digest only
//! has to tell things apart (output, directory names, ids), not resist a forger (SHA-256 does
//! that, for the oracle and the tree).

use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

/// Lowercase hexadecimal of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// The SHA-256 of `bytes`, in hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// FNV-1a, 64 bits, fed in pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> Fnv1a {
        Fnv1a(Fnv1a::OFFSET)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(Fnv1a::PRIME);
        }
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }

    /// The digest of `bytes` in one go.
    pub(crate) fn of(bytes: &[u8]) -> u64 {
        let mut hasher = Fnv1a::new();
        hasher.update(bytes);
        hasher.finish()
    }
}

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert_eq!(hex(&[]), "");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        assert_eq!(Fnv1a::of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a::of(b"a"), 0xaf63_dc4c_8601_ec8c);
        let mut pieces = Fnv1a::new();
        pieces.update(b"foo");
        pieces.update(b"bar");
        assert_eq!(pieces.finish(), Fnv1a::of(b"foobar"));
        assert_eq!(Fnv1a::of(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
