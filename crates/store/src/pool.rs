//! The transient store pool: reusable off-heap buffers, one CommitLog file in
//! size each, that appends are written into before a commit thread copies
//! them into the file.
//!
//! A buffer is borrowed when a CommitLog file is created and goes back to the
//! pool by itself once the file is fully committed and nothing refers to it.

use std::{
    io,
    sync::{Arc, Mutex, PoisonError},
};

use crate::mmap::AnonBuffer;

/// A fixed set of reusable write buffers.
#[derive(Debug, Clone)]
pub struct TransientStorePool {
    inner: Arc<PoolInner>,
}

#[derive(Debug)]
struct PoolInner {
    size: usize,
    available: Mutex<Vec<AnonBuffer>>,
}

/// A buffer on loan from a [`TransientStorePool`]; returned when dropped.
#[derive(Debug)]
pub struct PooledBuffer {
    buffer: Option<AnonBuffer>,
    pool: Arc<PoolInner>,
}

impl TransientStorePool {
    /// Allocates `size` buffers of `buffer_size` bytes, locked into memory
    /// when `lock` is set (a failure to lock is logged, not fatal).
    ///
    /// # Errors
    /// Allocation fails.
    pub fn new(size: usize, buffer_size: usize, lock: bool) -> io::Result<Self> {
        let buffers = (0..size)
            .map(|_| AnonBuffer::new(buffer_size, lock))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self {
            inner: Arc::new(PoolInner {
                size,
                available: Mutex::new(buffers),
            }),
        })
    }

    /// Takes a buffer, or `None` when all are on loan.
    pub fn borrow(&self) -> Option<Arc<PooledBuffer>> {
        let mut available = self
            .inner
            .available
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let buffer = available.pop()?;
        let left = available.len();
        drop(available);
        if left * 10 < self.inner.size * 4 {
            tracing::warn!(
                left,
                total = self.inner.size,
                "transient store pool is running low"
            );
        }
        Some(Arc::new(PooledBuffer {
            buffer: Some(buffer),
            pool: Arc::clone(&self.inner),
        }))
    }

    /// Buffers not on loan.
    pub fn available(&self) -> usize {
        self.inner
            .available
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Total number of buffers.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// RocketMQ's "deficient": no buffer is left.
    #[cfg(test)]
    pub fn is_deficient(&self) -> bool {
        self.available() == 0
    }
}

impl PooledBuffer {
    pub(crate) fn buffer(&self) -> &AnonBuffer {
        // Only `drop` takes the buffer out, so it is always here before.
        self.buffer
            .as_ref()
            .expect("pooled buffer used after it was returned")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            // The last user is gone; the buffer's stale bytes are overwritten
            // by the next file before they are committed.
            self.pool
                .available
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhausting_the_pool_makes_it_deficient_and_returning_clears_it() {
        let pool = TransientStorePool::new(2, 4096, false).unwrap();
        assert!(!pool.is_deficient());
        let a = pool.borrow().unwrap();
        let b = pool.borrow().unwrap();
        assert!(pool.is_deficient());
        assert!(pool.borrow().is_none());
        drop(a);
        assert_eq!(pool.available(), 1);
        assert!(!pool.is_deficient());
        drop(b);
        assert_eq!(pool.available(), pool.size());
    }
}
