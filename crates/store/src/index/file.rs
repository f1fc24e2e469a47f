//! One IndexFile in RocketMQ's layout (all numbers big-endian):
//!
//! - a 40-byte header: `beginTimestamp` i64 @0, `endTimestamp` i64 @8,
//!   `beginPhyOffset` i64 @16, `endPhyOffset` i64 @24, `hashSlotCount` i32
//!   @32 (slots that went from empty to used), `indexCount` i32 @36 (the
//!   next entry number; it starts at 1, entry 0 is never written and 0
//!   means "none");
//! - `maxHashSlotNum` slots of 4 bytes: the number of the newest entry
//!   whose key hashes to the slot;
//! - `maxIndexNum` entries of 20 bytes: `keyHash` i32, `phyOffset` i64,
//!   `timeDiff` i32 (seconds after the header's begin timestamp),
//!   `prevIndex` i32 (the previous entry of the same slot, 0 for none).
//!
//! A new entry goes to the head of its slot's chain. The file is sparse;
//! the header and slots are allocated when it is made, the entries a chunk
//! at a time ahead of the writer.
//!
//! The mapping sits behind a lock: the dispatch thread takes it to write
//! one message's keys, a query takes it to read while it walks a chain.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{PoisonError, RwLock, RwLockWriteGuard},
};

use crate::mmap::RandomAccessFile;

/// Bytes of the header.
pub(crate) const HEADER_SIZE: usize = 40;
/// Bytes of one hash slot.
pub(crate) const SLOT_SIZE: usize = 4;
/// Bytes of one entry.
pub(crate) const ENTRY_SIZE: usize = 20;
/// Entry bytes allocated at a time ahead of the writer.
const ALLOCATION_CHUNK: usize = 1 << 20;

/// How many slots and entries each IndexFile has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// `maxHashSlotNum`.
    pub slots: usize,
    /// `maxIndexNum`.
    pub entries: usize,
}

impl Geometry {
    /// Where the entries start.
    pub(crate) fn entries_at(&self) -> usize {
        HEADER_SIZE + self.slots * SLOT_SIZE
    }

    /// The file's length in bytes.
    pub(crate) fn file_size(&self) -> usize {
        self.entries_at() + self.entries * ENTRY_SIZE
    }
}

/// The header's values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IndexHeader {
    /// Store time of the first entry's message (ms).
    pub begin_timestamp: i64,
    /// Store time of the last entry's message (ms).
    pub end_timestamp: i64,
    /// CommitLog offset of the first entry's message.
    pub begin_phy_offset: i64,
    /// CommitLog offset of the last entry's message.
    pub end_phy_offset: i64,
    /// Slots in use.
    pub hash_slot_count: i32,
    /// The next entry number (1 when empty; 0 in a header never written).
    pub index_count: i32,
}

impl IndexHeader {
    fn read(b: &[u8]) -> Self {
        Self {
            begin_timestamp: get_i64(b, 0),
            end_timestamp: get_i64(b, 8),
            begin_phy_offset: get_i64(b, 16),
            end_phy_offset: get_i64(b, 24),
            hash_slot_count: get_i32(b, 32),
            index_count: get_i32(b, 36),
        }
    }

    fn write(&self, b: &mut [u8]) {
        put_i64(b, 0, self.begin_timestamp);
        put_i64(b, 8, self.end_timestamp);
        put_i64(b, 16, self.begin_phy_offset);
        put_i64(b, 24, self.end_phy_offset);
        put_i32(b, 32, self.hash_slot_count);
        put_i32(b, 36, self.index_count);
    }

    /// Whether `end_phy_offset` names a message already indexed (in this
    /// file or, for a file that follows a full one, in that one). Only a
    /// first file that has no entry yet has none.
    pub(crate) fn has_indexed(&self) -> bool {
        self.index_count > 1 || self.end_timestamp != 0 || self.end_phy_offset != 0
    }

    /// Whether the file's time range meets `[begin, end]`.
    pub(crate) fn overlaps(&self, begin: i64, end: i64) -> bool {
        begin <= self.end_timestamp && end >= self.begin_timestamp
    }
}

/// A hit of a query: a message's CommitLog offset and its store time as the
/// entry records it (whole seconds after the file's begin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    /// CommitLog offset.
    pub phy_offset: i64,
    /// Store time, rounded down to the second past the file's begin (ms).
    pub time: i64,
}

/// What a query looks for in one file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lookup {
    /// The key's hash ([`key_hash`]).
    pub hash: i32,
    /// Earliest store time (ms).
    pub begin: i64,
    /// Latest store time (ms).
    pub end: i64,
    /// Entries below this CommitLog offset point at deleted records.
    pub min_phy_offset: i64,
    /// Stop once this many hits were collected.
    pub max: usize,
}

/// One IndexFile.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    geometry: Geometry,
    data: RwLock<Data>,
}

#[derive(Debug)]
struct Data {
    map: RandomAccessFile,
    /// The header as last written.
    header: IndexHeader,
    /// Bytes from the start whose blocks are allocated.
    allocated: usize,
}

impl IndexFile {
    /// Creates a file whose header starts from `after`'s end (a file that
    /// follows a full one) or from nothing; the header and slots are
    /// allocated and the header written.
    ///
    /// # Errors
    /// The file cannot be made or allocated (it is removed again).
    pub(crate) fn create(
        path: &Path,
        geometry: Geometry,
        after: Option<&IndexHeader>,
    ) -> io::Result<Self> {
        let mut map = RandomAccessFile::create(path, geometry.file_size())?;
        if let Err(e) = map.allocate(0, geometry.entries_at()) {
            drop(map);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        let header = IndexHeader {
            begin_timestamp: after.map_or(0, |h| h.end_timestamp),
            end_timestamp: after.map_or(0, |h| h.end_timestamp),
            begin_phy_offset: after.map_or(0, |h| h.end_phy_offset),
            end_phy_offset: after.map_or(0, |h| h.end_phy_offset),
            hash_slot_count: 0,
            index_count: 1,
        };
        header.write(map.bytes_mut());
        Ok(Self {
            path: path.to_path_buf(),
            geometry,
            data: RwLock::new(Data {
                map,
                header,
                allocated: geometry.entries_at(),
            }),
        })
    }

    /// Opens an existing file.
    ///
    /// # Errors
    /// The file cannot be opened or mapped, or its length does not fit
    /// `geometry`.
    pub(crate) fn open(path: &Path, geometry: Geometry) -> io::Result<Self> {
        let map = RandomAccessFile::open(path, geometry.file_size())?;
        let mut header = IndexHeader::read(map.bytes());
        // A damaged count never sends a reader or writer past the entries.
        let most = i32::try_from(geometry.entries).unwrap_or(i32::MAX);
        header.index_count = header.index_count.clamp(1, most);
        let written = usize::try_from(header.index_count).unwrap_or(0);
        Ok(Self {
            path: path.to_path_buf(),
            geometry,
            data: RwLock::new(Data {
                map,
                header,
                // Entries past the count may be holes: allocated again
                // before they are written.
                allocated: geometry.entries_at() + written.min(geometry.entries) * ENTRY_SIZE,
            }),
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's name (its creation time, `yyyyMMddHHmmssSSS`).
    pub(crate) fn name(&self) -> &str {
        self.path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }

    /// The header's values.
    pub(crate) fn header(&self) -> IndexHeader {
        self.data
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .header
    }

    /// Takes the file for writing (one message's keys at a time).
    pub(crate) fn writer(&self) -> Writer<'_> {
        Writer {
            geometry: self.geometry,
            data: self.data.write().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Collects the hits of `lookup` into `out`, newest first, walking the
    /// chain of the hash's slot. Only the hash is compared: entries of other
    /// keys with the same hash are hits too.
    pub(crate) fn select(&self, lookup: &Lookup, out: &mut Vec<Hit>) {
        let data = self.data.read().unwrap_or_else(PoisonError::into_inner);
        let (b, h, g) = (data.map.bytes(), &data.header, &self.geometry);
        if h.index_count <= 1 {
            return;
        }
        let slot_at = HEADER_SIZE + slot_of(lookup.hash, g.slots) * SLOT_SIZE;
        let mut next = get_i32(b, slot_at);
        if next <= 0 || next >= h.index_count {
            return;
        }
        while out.len() < lookup.max {
            let at = g.entries_at() + next as usize * ENTRY_SIZE;
            let hash = get_i32(b, at);
            let phy_offset = get_i64(b, at + 4);
            let time_diff = get_i32(b, at + 12);
            let prev = get_i32(b, at + 16);
            if time_diff < 0 {
                break;
            }
            let time = h
                .begin_timestamp
                .saturating_add(i64::from(time_diff) * 1000);
            if hash == lookup.hash
                && time >= lookup.begin
                && time <= lookup.end
                && phy_offset >= lookup.min_phy_offset
            {
                out.push(Hit { phy_offset, time });
            }
            // Entries only ever point back to older ones: a chain that does
            // not go down (a damaged file) ends here instead of looping.
            if prev <= 0 || prev >= next || time < lookup.begin {
                break;
            }
            next = prev;
        }
    }

    /// Makes the file durable.
    ///
    /// # Errors
    /// The error of `msync`.
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.data
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .flush()
    }

    /// Removes the file's name; the mapping lives on until the last holder
    /// drops the file.
    ///
    /// # Errors
    /// The error of removing the name.
    pub(crate) fn unlink(&self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }
}

/// Why a key could not be written.
#[derive(Debug)]
pub(crate) enum PutError {
    /// Every entry is used.
    Full,
    /// The entry's blocks could not be allocated (a full disk).
    Io(io::Error),
}

/// Write access to a file, held for one message's keys.
pub(crate) struct Writer<'a> {
    geometry: Geometry,
    data: RwLockWriteGuard<'a, Data>,
}

impl Writer<'_> {
    /// The header's values.
    pub(crate) fn header(&self) -> &IndexHeader {
        &self.data.header
    }

    /// Entries still free.
    pub(crate) fn room(&self) -> usize {
        self.geometry
            .entries
            .saturating_sub(usize::try_from(self.data.header.index_count).unwrap_or(0))
    }

    /// Adds an entry for a key of hash `hash` (see [`key_hash`]) of the
    /// message at `phy_offset` stored at `store_timestamp`, at the head of
    /// its slot's chain.
    ///
    /// # Errors
    /// [`PutError::Full`] when no entry is free, [`PutError::Io`] when its
    /// blocks cannot be allocated; nothing was written then.
    pub(crate) fn put(
        &mut self,
        hash: i32,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> Result<(), PutError> {
        let g = self.geometry;
        let data = &mut *self.data;
        let mut h = data.header;
        let n = usize::try_from(h.index_count).unwrap_or(0).max(1);
        if n >= g.entries {
            return Err(PutError::Full);
        }
        let at = g.entries_at() + n * ENTRY_SIZE;
        if at + ENTRY_SIZE > data.allocated {
            let len = ALLOCATION_CHUNK.min(g.file_size() - data.allocated);
            data.map
                .allocate(data.allocated, len)
                .map_err(PutError::Io)?;
            data.allocated += len;
        }
        let slot_at = HEADER_SIZE + slot_of(hash, g.slots) * SLOT_SIZE;
        let b = data.map.bytes_mut();
        let mut prev = get_i32(b, slot_at);
        if prev <= 0 || prev >= n as i32 {
            prev = 0;
        }
        if n <= 1 {
            h.begin_timestamp = store_timestamp;
            h.begin_phy_offset = phy_offset;
        }
        let time_diff = if h.begin_timestamp <= 0 {
            0
        } else {
            ((store_timestamp - h.begin_timestamp) / 1000).clamp(0, i64::from(i32::MAX)) as i32
        };
        put_i32(b, at, hash);
        put_i64(b, at + 4, phy_offset);
        put_i32(b, at + 12, time_diff);
        put_i32(b, at + 16, prev);
        put_i32(b, slot_at, n as i32);
        if prev == 0 {
            h.hash_slot_count += 1;
        }
        h.index_count = n as i32 + 1;
        h.end_timestamp = store_timestamp;
        h.end_phy_offset = phy_offset;
        h.write(b);
        data.header = h;
        Ok(())
    }
}

/// The hash RocketMQ indexes `topic#key` by: Java's `String.hashCode` of it
/// (over UTF-16 units), made non-negative with `Math.abs`, whose
/// `Integer.MIN_VALUE` stays negative and is taken as 0.
pub(crate) fn key_hash(topic: &str, key: &str) -> i32 {
    let h = topic
        .encode_utf16()
        .chain("#".encode_utf16())
        .chain(key.encode_utf16())
        .fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        });
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

fn slot_of(hash: i32, slots: usize) -> usize {
    usize::try_from(hash).unwrap_or(0) % slots
}

fn get_i32(b: &[u8], at: usize) -> i32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(v)
}

fn get_i64(b: &[u8], at: usize) -> i64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(v)
}

fn put_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put_i64(b: &mut [u8], at: usize, v: i64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
