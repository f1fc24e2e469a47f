//! A broadcasting consumer's offsets, kept in a local file as RocketMQ's
//! clients keep them: `<dir>/<clientId>/<group>/offsets.json`, replaced
//! atomically (written to a temporary file, synced, renamed).

use std::{
    collections::HashMap,
    io::Write,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::MessageQueue;

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    offset_table: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    topic: String,
    broker_name: String,
    queue_id: u32,
    offset: u64,
}

/// The offsets file of a client in a group.
#[derive(Debug, Clone)]
pub(crate) struct LocalOffsets {
    path: PathBuf,
}

impl LocalOffsets {
    pub(crate) fn new(dir: &Path, client_id: &str, group: &str) -> Self {
        // Client ids hold `@` and `:`; keep the path portable.
        let client = client_id.replace([':', '/'], "_");
        Self {
            path: dir.join(client).join(group).join("offsets.json"),
        }
    }

    /// The stored offsets (none when there is no file yet).
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub(crate) fn load(&self) -> std::io::Result<HashMap<MessageQueue, u64>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
            Err(e) => return Err(e),
        };
        let file: OffsetFile = serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", self.path.display()),
            )
        })?;
        Ok(file
            .offset_table
            .into_iter()
            .map(|e| {
                (
                    MessageQueue::new(e.topic, e.broker_name, e.queue_id),
                    e.offset,
                )
            })
            .collect())
    }

    /// Replaces the file with `offsets`, keeping stored queues not in it.
    ///
    /// # Errors
    /// The file cannot be written.
    pub(crate) fn save(&self, offsets: &HashMap<MessageQueue, u64>) -> std::io::Result<()> {
        let mut all = self.load().unwrap_or_default();
        all.extend(offsets.iter().map(|(q, o)| (q.clone(), *o)));
        let mut entries: Vec<Entry> = all
            .into_iter()
            .map(|(q, offset)| Entry {
                topic: q.topic,
                broker_name: q.broker_name,
                queue_id: q.queue_id,
                offset,
            })
            .collect();
        entries.sort_by(|a, b| {
            (&a.topic, &a.broker_name, a.queue_id).cmp(&(&b.topic, &b.broker_name, b.queue_id))
        });
        let text = serde_json::to_vec_pretty(&OffsetFile {
            offset_table: entries,
        })
        .map_err(std::io::Error::other)?;
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("json.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_a_reload_and_merge() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalOffsets::new(dir.path(), "10.0.0.1@DEFAULT", "G");
        assert!(store.load().unwrap().is_empty());
        let q0 = MessageQueue::new("T", "b", 0);
        let q1 = MessageQueue::new("T", "b", 1);
        store.save(&HashMap::from([(q0.clone(), 5)])).unwrap();
        store.save(&HashMap::from([(q1.clone(), 7)])).unwrap();
        let back = store.load().unwrap();
        assert_eq!((back[&q0], back[&q1]), (5, 7));
    }
}
