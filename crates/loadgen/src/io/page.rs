//! Page-aligned byte buffers, for memory the kernel copies socket bytes into or out of.
//!
//! Why: the kernel copies with `rep movsb`, which on this class of CPU (AMD EPYC with FSRM) runs up
//! to 20x slower when the destination is 1..31 bytes past the source modulo 4096 (measured on the
//! echo flood; see `echo::Pattern`). A large `Vec` comes from malloc 16 bytes past a page boundary,
//! exactly the slow case against the kernel's page-aligned socket memory. Alignment is a matter of
//! speed only: any address is correct.

/// The page size the alignment is for (also the x86-64 and aarch64 default).
pub(crate) const PAGE: usize = 4096;

/// `len` zeroed bytes starting on a page boundary (a `Vec` one page longer, used from its first
/// page-aligned byte, so it is freed as any `Vec` is).
#[derive(Default)]
pub(crate) struct PageBuf {
    buf: Vec<u8>,
    at: usize,
    len: usize,
}

impl PageBuf {
    pub(crate) fn zeroed(len: usize) -> PageBuf {
        let buf = vec![0u8; len + PAGE];
        let at = (buf.as_ptr() as usize).wrapping_neg() % PAGE;
        PageBuf { buf, at, len }
    }

    /// The first byte, without making a reference to the contents: for memory the kernel writes
    /// into behind our back (a provided-buffer ring), as `Vec::as_ptr` is.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.buf.as_ptr().wrapping_add(self.at)
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_page_and_holds_len_zeroed_bytes() {
        for len in [1, 100, PAGE, 3 * PAGE + 17, 1 << 20] {
            let mut b = PageBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % PAGE, 0, "len {len}");
            assert_eq!(b.as_ptr(), b.as_slice().as_ptr());
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice()[len - 1] = 7;
            assert_eq!(b.as_slice()[len - 1], 7);
        }
    }
}
