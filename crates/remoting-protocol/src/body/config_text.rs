//! The `key=value` text of `GET_BROKER_CONFIG` and `UPDATE_BROKER_CONFIG`.
//!
//! One entry per line; blank lines and lines starting with `#` or `!` are
//! skipped; the key ends at the first `=` or `:`; keys and values are trimmed.

use indexmap::IndexMap;

use super::BodyError;

/// Renders entries as `key=value` lines.
pub fn encode_config_text<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in entries {
        out.push_str(k);
        out.push('=');
        out.push_str(v);
        out.push('\n');
    }
    out
}

/// Parses `key=value` lines; a line without a separator is a key with an
/// empty value, as Java's `Properties` reads it.
///
/// # Errors
/// [`BodyError::InvalidUtf8`] when the body is not UTF-8.
pub fn decode_config_text(body: &[u8]) -> Result<IndexMap<String, String>, BodyError> {
    let text = std::str::from_utf8(body).map_err(|_| BodyError::InvalidUtf8)?;
    let mut out = IndexMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (k, v) = match line.find(['=', ':']) {
            Some(pos) => (&line[..pos], &line[pos + 1..]),
            None => (line, ""),
        };
        out.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_java_properties_text() {
        let text = b"# comment\nwaitTimeMillsInSendQueue=300\n  brokerName : broker-a \n\nflag\n";
        let map = decode_config_text(text).unwrap();
        assert_eq!(map["waitTimeMillsInSendQueue"], "300");
        assert_eq!(map["brokerName"], "broker-a");
        assert_eq!(map["flag"], "");
        let again = encode_config_text(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        assert_eq!(decode_config_text(again.as_bytes()).unwrap(), map);
    }
}
