//! Digests and their text form: one hex encoder, and the hashes used where a digest only has to
//! tell things apart, not resist a forger (SHA-256 does that, for the oracle and the tree):
//! FNV-1a for short names and ids, XXH64 for a command's output, which can be gigabytes.

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

/// XXH64 (seed 0), fed in pieces: eight bytes a step in four independent lanes, so a gigabyte of
/// output hashes in a small part of the time a byte-at-a-time hash takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Xxh64 {
    lanes: [u64; 4],
    /// Bytes not yet in a full 32-byte stripe; `pending` of them are meaningful.
    buffer: [u8; 32],
    pending: usize,
    total: u64,
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

impl Xxh64 {
    /// The name a digest of this hash is written with (`xxh64:<16 hex digits>`), so that a digest
    /// of another hash is never taken for one of this.
    pub(crate) const KIND: &'static str = "xxh64";

    pub(crate) fn new() -> Xxh64 {
        Xxh64 {
            lanes: [P1.wrapping_add(P2), P2, 0, P1.wrapping_neg()],
            buffer: [0; 32],
            pending: 0,
            total: 0,
        }
    }

    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.pending > 0 {
            let take = bytes.len().min(32 - self.pending);
            self.buffer[self.pending..self.pending + take].copy_from_slice(&bytes[..take]);
            self.pending += take;
            bytes = &bytes[take..];
            if self.pending < 32 {
                return;
            }
            let stripe = self.buffer;
            self.stripe(&stripe);
            self.pending = 0;
        }
        let mut stripes = bytes.chunks_exact(32);
        for stripe in &mut stripes {
            self.stripe(stripe);
        }
        let rest = stripes.remainder();
        self.buffer[..rest.len()].copy_from_slice(rest);
        self.pending = rest.len();
    }

    fn stripe(&mut self, stripe: &[u8]) {
        for (lane, word) in self.lanes.iter_mut().zip(stripe.chunks_exact(8)) {
            *lane = round(*lane, word_at(word));
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut hash = if self.total >= 32 {
            let [a, b, c, d] = self.lanes;
            let mut hash = a
                .rotate_left(1)
                .wrapping_add(b.rotate_left(7))
                .wrapping_add(c.rotate_left(12))
                .wrapping_add(d.rotate_left(18));
            for lane in self.lanes {
                hash = (hash ^ round(0, lane)).wrapping_mul(P1).wrapping_add(P4);
            }
            hash
        } else {
            P5
        };
        hash = hash.wrapping_add(self.total);
        let rest = &self.buffer[..self.pending];
        let mut words = rest.chunks_exact(8);
        for word in &mut words {
            hash = (hash ^ round(0, word_at(word))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        }
        let mut rest = words.remainder();
        if let Some((word, after)) = rest.split_first_chunk::<4>() {
            hash = (hash ^ u64::from(u32::from_le_bytes(*word)).wrapping_mul(P1))
                .rotate_left(23)
                .wrapping_mul(P2)
                .wrapping_add(P3);
            rest = after;
        }
        for byte in rest {
            hash = (hash ^ u64::from(*byte).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
        }
        hash ^= hash >> 33;
        hash = hash.wrapping_mul(P2);
        hash ^= hash >> 29;
        hash = hash.wrapping_mul(P3);
        hash ^ (hash >> 32)
    }

    /// The digest written down: `xxh64:` and 16 hex digits.
    pub(crate) fn finish_text(&self) -> String {
        format!("{}:{:016x}", Xxh64::KIND, self.finish())
    }
}

impl Default for Xxh64 {
    fn default() -> Xxh64 {
        Xxh64::new()
    }
}

fn round(lane: u64, word: u64) -> u64 {
    lane.wrapping_add(word.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

/// The little-endian word of an eight-byte piece (`chunks_exact(8)` hands out only those).
fn word_at(piece: &[u8]) -> u64 {
    piece.first_chunk::<8>().map_or(0, |word| u64::from_le_bytes(*word))
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
        let mut hasher = Xxh64::new();
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
            let mut pieces = Xxh64::new();
            bytes.chunks(size).for_each(|piece| pieces.update(piece));
            assert_eq!(pieces.finish(), whole, "pieces of {size}");
        }
        assert_eq!(whole, 0xcae8_6109_f50d_ef4c);
        assert_ne!(xxh64(&bytes[..999]), whole);
    }

    #[test]
    fn an_output_digest_names_its_hash_and_never_equals_an_fnv1a_one() {
        let mut hasher = Xxh64::new();
        hasher.update(b"one");
        let now = hasher.finish_text();
        assert_eq!(now, format!("xxh64:{:016x}", xxh64(b"one")));
        assert_ne!(now, format!("{:016x}", Fnv1a::of(b"one")));
    }
}
