//! Paged KV-cache arithmetic.

/// Blocks needed to hold `tokens` tokens in blocks of `block_size`.
#[inline]
pub fn blocks_for(tokens: u64, block_size: u32) -> u64 {
    tokens.div_ceil(block_size as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rounding() {
        assert_eq!(super::blocks_for(0, 16), 0);
        assert_eq!(super::blocks_for(1, 16), 1);
        assert_eq!(super::blocks_for(16, 16), 1);
        assert_eq!(super::blocks_for(17, 16), 2);
    }
}
