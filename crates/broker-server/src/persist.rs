//! Durable replacement of small configuration files.

use std::{fs, io::Write, path::Path};

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
