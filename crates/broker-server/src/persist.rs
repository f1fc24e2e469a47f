//! Small configuration files: read (a missing file is the default) and
//! durably replaced.

use std::{fs, io::Write, path::Path};

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
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}
