//! Integers as P4Runtime bytestrings (specification section 8.3): a
//! `bit<W>` value travels as the shortest big-endian string that holds it
//! (one byte for zero), the canonical form devices store and read back.

use crate::Error;

/// `value` as the canonical bytestring of a `bitwidth`-bit field; fails if
/// it does not fit.
pub fn encode(value: u64, bitwidth: u32) -> Result<Vec<u8>, Error> {
    if bitwidth < 64 && value >> bitwidth != 0 {
        return Err(Error::TooWide { value, bitwidth });
    }
    let be = value.to_be_bytes();
    let first = be.iter().position(|&b| b != 0).unwrap_or(7);
    Ok(be[first..].to_vec())
}

/// The integer a bytestring of up to 8 bytes holds (longer ones: its last
/// 8 bytes).
pub fn decode(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_shortest_big_endian_and_checked_against_the_width() {
        assert_eq!(encode(0, 9).unwrap(), vec![0]);
        assert_eq!(encode(1, 9).unwrap(), vec![1]);
        assert_eq!(encode(0x1ff, 9).unwrap(), vec![1, 0xff]);
        assert!(encode(0x200, 9).is_err());
        assert_eq!(encode(u64::MAX, 64).unwrap(), vec![0xff; 8]);
        assert_eq!(decode(&encode(0x0a00_0001, 32).unwrap()), 0x0a00_0001);
    }
}
