//! Small configuration files: read (a missing file is the default) and
//! durably replaced.

use std::{
    fs,
    io::Write,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

use serde::de::DeserializeOwned;

/// Reads a JSON file as RocketMQ's components write it (see
/// `remoting_protocol::body::from_json`); a missing file gives the default.
///
/// # Errors
/// The file exists but cannot be read, or is not the expected document
/// (the error names the file).
pub fn read_json<T: DeserializeOwned + Default>(path: &Path) -> std::io::Result<T> {
    match fs::read(path) {
        Ok(bytes) => remoting_protocol::body::from_json(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(e),
    }
}

/// Replaces `path` with `bytes`: writes a temporary file, syncs it, renames
/// it over the old one and syncs the directory, so that a crash leaves
/// either the old or the new content.
///
/// # Errors
/// Any file operation's error.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, 0o644)
}

/// [`write_atomically`] for a file of secrets: readable and writable by
/// its owner only.
///
/// # Errors
/// Any file operation's error.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, 0o600)
}

fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir)?;
    // A name of its own per write: two writers never share a temporary file.
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_leave_one_whole_file_and_no_temporary_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("t.json");
        std::thread::scope(|s| {
            for i in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomically(
                            path,
                            format!("{{\"writer\":{i}}}").repeat(100).as_bytes(),
                        )
                        .unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let one = &text[..text.find('}').unwrap() + 1];
        assert_eq!(text, one.repeat(100), "a whole write of one writer");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["t.json"], "temporary files left behind");
    }
}
