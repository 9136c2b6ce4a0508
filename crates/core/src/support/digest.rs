//! Digests and their text form: one hex encoder, and the hashes used where a digest only has to
//! tell things apart, not resist a forger (SHA-256 does that, for the oracle and the tree):
//! FNV-1a for short names and ids, XXH64 for a command's output, which can be gigabytes.
//!
//! XXH64 comes from `twox-hash` rather than `xxhash-rust`: both are maintained and exact, but
//! `twox-hash` builds with no dependencies once its defaults are off, carries the same MIT
//! licence as this project, and its hasher derives `Debug`, `Clone` and `PartialEq`, which the
//! captured output it sits in needs. Digests written before it (by a hand-written XXH64) are
//! the same bits, so every ledger line reads as it did.

use std::fmt::Write as _;

use std::hash::Hasher as _;

use sha2::{Digest as _, Sha256};
use twox_hash::XxHash64;

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

/// XXH64 (seed 0, its default), fed in pieces: eight bytes a step in four independent lanes, so a gigabyte of
/// output hashes in a small part of the time a byte-at-a-time hash takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Xxh64(XxHash64);

// Two hashers are equal when their inputs so far hash alike: equality is reflexive.
impl Eq for Xxh64 {}

impl Xxh64 {
    /// The name a digest of this hash is written with (`xxh64:<16 hex digits>`), so that a digest
    /// of another hash is never taken for one of this.
    pub(crate) const KIND: &'static str = "xxh64";

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }

    /// The digest written down: `xxh64:` and 16 hex digits.
    pub(crate) fn finish_text(&self) -> String {
        format!("{}:{:016x}", Xxh64::KIND, self.finish())
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

    fn xxh64(bytes: &[u8]) -> u64 {
        let mut hasher = Xxh64::default();
        hasher.update(bytes);
        hasher.finish()
    }

    #[test]
    fn xxh64_matches_the_reference_values() {
        assert_eq!(xxh64(b""), 0xef46_db37_51d8_e999);
        assert_eq!(xxh64(b"a"), 0xd24e_c4f1_a98c_6e5b);
        assert_eq!(xxh64(b"abc"), 0x44bc_2cf5_ad77_0999);
        assert_eq!(xxh64(b"Nobody inspects the spammish repetition"), 0xfbce_a83c_8a37_8bf1);
    }

    #[test]
    fn xxh64_gives_the_same_digest_whatever_the_pieces() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| ((i * 7 + i / 13) % 256).to_le_bytes()[0]).collect();
        let whole = xxh64(&bytes);
        for size in [1, 3, 7, 8, 31, 32, 33, 64, 100, 999] {
            let mut pieces = Xxh64::default();
            bytes.chunks(size).for_each(|piece| pieces.update(piece));
            assert_eq!(pieces.finish(), whole, "pieces of {size}");
        }
        assert_eq!(whole, 0xcae8_6109_f50d_ef4c);
        assert_ne!(xxh64(&bytes[..999]), whole);
    }

    #[test]
    fn an_output_digest_names_its_hash_and_never_equals_an_fnv1a_one() {
        let mut hasher = Xxh64::default();
        hasher.update(b"one");
        let now = hasher.finish_text();
        assert_eq!(now, format!("xxh64:{:016x}", xxh64(b"one")));
        assert_ne!(now, format!("{:016x}", Fnv1a::of(b"one")));
    }
}
