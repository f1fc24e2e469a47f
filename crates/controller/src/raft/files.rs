//! The small files the controller keeps its Raft state in: an append-only
//! log of checksummed records, and whole files replaced atomically.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read, Write},
    path::Path,
};

/// Bytes before a record's payload: its length and CRC32, both big-endian.
const RECORD_HEADER: usize = 8;

/// The largest record read back; a longer length field is a torn write.
const MAX_RECORD: usize = 64 << 20;

/// Appends `payload` to `out` as one record.
pub(crate) fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
    out.extend_from_slice(payload);
}

/// The records of a log file, and the length of its intact prefix: a record
/// cut short or failing its checksum ends the log (a write torn by a crash).
pub(crate) fn read_records(path: &Path) -> io::Result<(Vec<Vec<u8>>, u64)> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    }
    let mut records = Vec::new();
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + RECORD_HEADER) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let start = at + RECORD_HEADER;
        let Some(payload) = bytes.get(start..start + len).filter(|_| len <= MAX_RECORD) else {
            break;
        };
        if crc32fast::hash(payload) != crc {
            break;
        }
        records.push(payload.to_vec());
        at = start + len;
    }
    Ok((records, at as u64))
}

/// Opens `path` for appending after cutting it to `len` bytes.
pub(crate) fn open_for_append(path: &Path, len: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(false)
        .open(path)?;
    if file.metadata()?.len() != len {
        file.set_len(len)?;
        file.sync_all()?;
    }
    let mut file = file;
    io::Seek::seek(&mut file, io::SeekFrom::Start(len))?;
    Ok(file)
}

/// Replaces `path` with `bytes`: written beside it, synced, renamed over it,
/// and the directory synced, so a crash leaves the old file or the new one.
/// With `durable` false the syncs are skipped: a crash may then keep the old
/// file, never a mix.
pub(crate) fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, path)?;
    if durable {
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
    }
    Ok(())
}

/// The contents of `path`, or `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_or_corrupt_tail_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut bytes = Vec::new();
        encode_record(b"one", &mut bytes);
        encode_record(b"two", &mut bytes);
        let intact = bytes.len() as u64;
        encode_record(b"three", &mut bytes);
        // Cut the third record short.
        bytes.truncate(bytes.len() - 2);
        fs::write(&path, &bytes).unwrap();
        let (records, len) = read_records(&path).unwrap();
        assert_eq!(records, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(len, intact);
        // A flipped payload byte fails the checksum.
        let mut corrupt = bytes[..intact as usize].to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        fs::write(&path, &corrupt).unwrap();
        let (records, len) = read_records(&path).unwrap();
        assert_eq!(records, [b"one".to_vec()]);
        assert_eq!(len, 11);
        // Appending starts after the intact prefix.
        let mut f = open_for_append(&path, len).unwrap();
        let mut more = Vec::new();
        encode_record(b"four", &mut more);
        f.write_all(&more).unwrap();
        let (records, _) = read_records(&path).unwrap();
        assert_eq!(records, [b"one".to_vec(), b"four".to_vec()]);
    }

    #[test]
    fn replaced_files_read_back_and_missing_ones_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.json");
        assert_eq!(read_optional(&path).unwrap(), None);
        replace(&path, b"a", true).unwrap();
        replace(&path, b"bb", false).unwrap();
        assert_eq!(read_optional(&path).unwrap().unwrap(), b"bb");
        assert!(!path.with_extension("tmp").exists());
    }
}
