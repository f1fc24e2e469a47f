//! Receipt handles: the opaque string each delivery carries. It names the
//! message (topic, queue id, queue offset) and the delivery (a sequence
//! number unique across restarts), behind a CRC-32 of the rest so that a
//! damaged or made-up handle is recognised as malformed.
//!
//! Layout: `CCCCCCCC` (CRC-32 of the body, 8 lower-case hex digits), then
//! the body `seq.queue.offset.topic` (sequence in hex, queue id and offset in
//! decimal, the topic last so that it may contain any character).

/// Longest handle accepted: CRC, a 64-bit hex sequence, a queue id, an
/// offset, three dots and a 255-byte topic, with room to spare.
const MAX_LEN: usize = 8 + 16 + 11 + 20 + 3 + 255 + 64;

/// What a receipt handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handle<'a> {
    /// The delivery's sequence number.
    pub seq: u64,
    /// Queue id of the message.
    pub queue_id: i32,
    /// Queue offset of the message.
    pub offset: i64,
    /// Topic of the message.
    pub topic: &'a str,
}

impl<'a> Handle<'a> {
    /// The handle's text.
    pub fn encode(&self) -> String {
        let body = format!(
            "{:x}.{}.{}.{}",
            self.seq, self.queue_id, self.offset, self.topic
        );
        format!("{:08x}{body}", crc32fast::hash(body.as_bytes()))
    }

    /// Reads a handle, refusing anything [`Handle::encode`] would not have
    /// written; the error says what is wrong.
    pub fn parse(text: &'a str) -> Result<Self, String> {
        if text.len() > MAX_LEN {
            return Err(format!(
                "receipt handle of {} bytes is longer than any issued ({MAX_LEN} bytes at most)",
                text.len()
            ));
        }
        let (Some(crc), Some(body)) = (text.get(..8), text.get(8..)) else {
            return Err("receipt handle is too short".into());
        };
        if !crc.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("receipt handle does not start with its 8-digit checksum".into());
        }
        let crc = u32::from_str_radix(crc, 16)
            .map_err(|e| format!("receipt handle checksum unreadable: {e}"))?;
        if crc != crc32fast::hash(body.as_bytes()) {
            return Err(
                "receipt handle checksum does not match (damaged or not issued here)".into(),
            );
        }
        let mut parts = body.splitn(4, '.');
        let (Some(seq), Some(queue_id), Some(offset), Some(topic)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("receipt handle lacks one of sequence, queue, offset, topic".into());
        };
        let seq = u64::from_str_radix(seq, 16)
            .map_err(|e| format!("receipt handle sequence {seq:?}: {e}"))?;
        let queue_id = queue_id
            .parse::<i32>()
            .map_err(|e| format!("receipt handle queue id {queue_id:?}: {e}"))?;
        let offset = offset
            .parse::<i64>()
            .ok()
            .filter(|o| *o >= 0)
            .ok_or_else(|| format!("receipt handle offset {offset:?} is not a queue offset"))?;
        if topic.is_empty() {
            return Err("receipt handle names no topic".into());
        }
        Ok(Self {
            seq,
            queue_id,
            offset,
            topic,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_including_topics_with_dots() {
        for topic in ["T", "a.b.c", "%RETRY%G", "x-y_z"] {
            let h = Handle {
                seq: 0x1234_5678_9abc,
                queue_id: 7,
                offset: 99_000,
                topic,
            };
            let text = h.encode();
            assert_eq!(Handle::parse(&text), Ok(h), "{text}");
        }
    }

    #[test]
    fn malformed_handles_are_refused_with_a_reason() {
        let good = Handle {
            seq: 5,
            queue_id: 1,
            offset: 2,
            topic: "T",
        }
        .encode();
        let mut flipped = good.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = b'U';
        let flipped = String::from_utf8(flipped).unwrap();
        let long = "0".repeat(MAX_LEN + 1);
        let cases = [
            ("", "too short"),
            ("abc", "too short"),
            ("zzzzzzzz5.1.2.T", "checksum"),
            (flipped.as_str(), "does not match"),
            (long.as_str(), "longer"),
            ("é", "too short"),
        ];
        for (text, why) in cases {
            let err = Handle::parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
        for body in ["5.1.T", "g.1.2.T", "5.x.2.T", "5.1.-2.T", "5.1.2."] {
            let text = format!("{:08x}{body}", crc32fast::hash(body.as_bytes()));
            assert!(Handle::parse(&text).is_err(), "{text} accepted");
        }
    }
}
