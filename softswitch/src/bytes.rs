//! P4Runtime bytestrings (specification section 8.3 "Bytestrings").
//!
//! A `bit<W>` value travels as a big-endian byte string. The receiver puts
//! no limit on the string's length but checks that the value it encodes
//! fits in W bits; the canonical form, which the server stores and returns
//! in reads (read-write symmetry), is the shortest string holding the value
//! (one byte for zero).

use crate::error::P4Error;

/// Checks that `value` encodes an unsigned integer of at most `bitwidth`
/// bits and returns its canonical (shortest) form.
///
/// Errors: an empty string is `INVALID_ARGUMENT`; a value wider than
/// `bitwidth` is `OUT_OF_RANGE`. `what` names the value in the message.
pub fn canonical_bytes(value: &[u8], bitwidth: u32, what: &str) -> Result<Vec<u8>, P4Error> {
    if value.is_empty() {
        return Err(P4Error::invalid(format!(
            "{what}: empty bytestring (section 8.3 requires at least one byte)"
        )));
    }
    let first = value
        .iter()
        .position(|b| *b != 0)
        .unwrap_or(value.len() - 1);
    let canon = &value[first..];
    let bits = match canon[0] {
        0 => 0,
        b => (canon.len() as u32 - 1) * 8 + (8 - b.leading_zeros()),
    };
    if bits > bitwidth {
        return Err(P4Error::out_of_range(format!(
            "{what}: value 0x{} does not fit in {bitwidth} bits",
            hex(canon)
        )));
    }
    Ok(canon.to_vec())
}

/// Left-pads a canonical value with zero bytes to `ceil(bitwidth / 8)`
/// bytes, the fixed width the data plane compares on.
pub fn to_fixed_width(canon: &[u8], bitwidth: u32) -> Vec<u8> {
    let width = (bitwidth as usize).div_ceil(8).max(canon.len());
    let mut out = vec![0u8; width - canon.len()];
    out.extend_from_slice(canon);
    out
}

/// A mask of the top `prefix_len` bits of a `bitwidth`-bit value, as
/// `ceil(bitwidth / 8)` bytes.
pub(crate) fn prefix_mask(prefix_len: u32, bitwidth: u32) -> Vec<u8> {
    let width = (bitwidth as usize).div_ceil(8);
    let pad = width as u32 * 8 - bitwidth;
    let mut mask = vec![0u8; width];
    for bit in 0..prefix_len {
        let pos = pad + bit; // bit position from the most significant bit
        mask[(pos / 8) as usize] |= 0x80 >> (pos % 8);
    }
    mask
}

/// True when `value & !mask` has a bit set (both of the same length).
pub(crate) fn bits_outside(value: &[u8], mask: &[u8]) -> bool {
    value.iter().zip(mask).any(|(v, m)| v & !m != 0)
}

/// True when every bit of a `bitwidth`-bit value is set.
pub(crate) fn all_ones(canon: &[u8], bitwidth: u32) -> bool {
    to_fixed_width(canon, bitwidth) == prefix_mask(bitwidth, bitwidth)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_p4::google::rpc::Code;

    #[test]
    fn canonical_strips_leading_zero_bytes() {
        assert_eq!(canonical_bytes(&[0, 0, 1, 2], 16, "x").unwrap(), vec![1, 2]);
        assert_eq!(canonical_bytes(&[0, 0], 9, "x").unwrap(), vec![0]);
        assert_eq!(canonical_bytes(&[1, 0xff], 9, "x").unwrap(), vec![1, 0xff]);
    }

    #[test]
    fn too_wide_is_out_of_range_and_empty_is_invalid() {
        assert_eq!(
            canonical_bytes(&[2, 0], 9, "x").unwrap_err().code,
            Code::OutOfRange
        );
        assert_eq!(
            canonical_bytes(&[1, 0, 0], 16, "x").unwrap_err().code,
            Code::OutOfRange
        );
        assert_eq!(
            canonical_bytes(&[], 16, "x").unwrap_err().code,
            Code::InvalidArgument
        );
    }

    #[test]
    fn prefix_masks_respect_odd_widths() {
        assert_eq!(prefix_mask(24, 32), vec![0xff, 0xff, 0xff, 0]);
        assert_eq!(prefix_mask(1, 9), vec![1, 0]);
        assert_eq!(prefix_mask(9, 9), vec![1, 0xff]);
        assert!(all_ones(&[1, 0xff], 9));
        assert!(bits_outside(&[10, 0, 0, 1], &prefix_mask(24, 32)));
    }
}
