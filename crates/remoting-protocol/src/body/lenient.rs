//! Body fields read as fastjson 1.2.83 reads them into RocketMQ's Java
//! classes, so that what the Java, C++ and Go clients write decodes the
//! same way (`#[serde(deserialize_with = "...")]` on each body field):
//!
//! | field | accepted |
//! |---|---|
//! | integer | a JSON number (a fraction truncated toward zero), `true`/`false` (1/0), a decimal string with an optional sign; `""`, `"null"` and `null` give 0 |
//! | double | a JSON number, `true`/`false` (1/0), a string holding a number; `""`, `"null"` and `null` give 0 |
//! | boolean | `true`/`false`; a number (1 is true, anything else false); the strings `true`, `1`, `T`, `Y` and `false`, `0`, `F`, `N`, `""` in any case |
//! | string | a string; a number or boolean as its text; `null` as `""` |
//! | enum | a constant's name in any case; its ordinal as a JSON number; an unknown name, `""` or a digit string as absent (`""`) |
//! | list | a list; `null` as empty |
//!
//! Anything else is an error that fails the body, as it fails fastjson.

use std::{fmt, marker::PhantomData};

use serde::{
    de::{self, SeqAccess, Visitor},
    Deserialize, Deserializer,
};

/// An integer field (`i32` or `i64`).
///
/// # Errors
/// A string that is not a decimal integer, a value out of range, or a
/// list or object.
pub fn int<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64> + Default,
{
    struct Int<T>(PhantomData<T>);
    impl<T: TryFrom<i64> + Default> Int<T> {
        fn fit<E: de::Error>(v: i64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
        }
    }
    impl<T: TryFrom<i64> + Default> Visitor<'_> for Int<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer, or a string holding one")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            Self::fit(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            Self::fit(i64::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))?)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            if !v.is_finite() || v.abs() >= 9.3e18 {
                return Err(E::custom(format!("{v} is out of range")));
            }
            Self::fit(v.trunc() as i64)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
            Self::fit(i64::from(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            if v.is_empty() || v == "null" {
                return Ok(T::default());
            }
            let n =
                parse_decimal(v).ok_or_else(|| E::custom(format!("{v:?} is not an integer")))?;
            Self::fit(n)
        }
        fn visit_unit<E: de::Error>(self) -> Result<T, E> {
            Ok(T::default())
        }
    }
    d.deserialize_any(Int(PhantomData))
}

/// A floating-point field (`f64`).
///
/// # Errors
/// A string that is not a number, or a list or object.
pub fn double<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct Double;
    impl Visitor<'_> for Double {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number, or a string holding one")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<f64, E> {
            Ok(f64::from(u8::from(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            if v.is_empty() || v == "null" {
                return Ok(0.0);
            }
            v.parse()
                .map_err(|_| E::custom(format!("{v:?} is not a number")))
        }
        fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
            Ok(0.0)
        }
    }
    d.deserialize_any(Double)
}

/// A boolean field.
///
/// # Errors
/// A string other than those the module doc lists, or a list or object.
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Bool;
    impl Visitor<'_> for Bool {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a boolean, a number, or true/false/1/0/T/F/Y/N")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
            Ok(v == 1)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
            Ok(v == 1)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
            Ok(v == 1.0)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "t" | "y" => Ok(true),
                "false" | "0" | "f" | "n" | "" => Ok(false),
                _ => Err(E::custom(format!("{v:?} is not a boolean"))),
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }
    d.deserialize_any(Bool)
}

/// A string field.
///
/// # Errors
/// A list or object.
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, number or boolean")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    d.deserialize_any(Text)
}

/// A list field whose elements read as `T` does; `null` is an empty list.
///
/// # Errors
/// Anything but a list or `null`, or an element that fails.
pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A list of integers whose elements may be numeric strings (Go's
/// `codeSet`); `null` is empty, and so is a `""` element (Java reads it as a
/// null element).
///
/// # Errors
/// Anything but a list or `null`, or an element that is not an integer.
pub fn int_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    struct Element(Option<i32>);
    impl<'de> Deserialize<'de> for Element {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            #[derive(Deserialize)]
            #[serde(untagged)]
            enum Raw {
                Text(String),
                Other(#[serde(deserialize_with = "int")] i32),
            }
            match Raw::deserialize(d)? {
                Raw::Text(t) if t.is_empty() => Ok(Element(None)),
                Raw::Text(t) => parse_decimal(&t)
                    .and_then(|n| i32::try_from(n).ok())
                    .map(|n| Element(Some(n)))
                    .ok_or_else(|| de::Error::custom(format!("{t:?} is not a 32-bit integer"))),
                Raw::Other(n) => Ok(Element(Some(n))),
            }
        }
    }
    struct Elements;
    impl<'de> Visitor<'de> for Elements {
        type Value = Vec<i32>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of integers")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<i32>, A::Error> {
            let mut out = Vec::new();
            while let Some(Element(v)) = seq.next_element()? {
                out.extend(v);
            }
            Ok(out)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Vec<i32>, E> {
            Ok(Vec::new())
        }
    }
    d.deserialize_any(Elements)
}

/// Reads a Java enum given by name (any case) or by ordinal into its
/// canonical name: `names` are the constants in declaration order. An
/// unknown name, `""` or a digit string give `""` (Java's null); an
/// ordinal out of range is an error.
///
/// # Errors
/// An ordinal outside `names`, or a list or object.
pub fn enum_name<'de, D: Deserializer<'de>>(
    d: D,
    names: &'static [&'static str],
) -> Result<String, D::Error> {
    struct Name(&'static [&'static str]);
    impl Name {
        fn ordinal<E: de::Error>(&self, v: i64) -> Result<String, E> {
            usize::try_from(v)
                .ok()
                .and_then(|i| self.0.get(i))
                .map(|n| (*n).to_owned())
                .ok_or_else(|| E::custom(format!("{v} is not an ordinal of {}", self.0.join("|"))))
        }
    }
    impl Visitor<'_> for Name {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "one of {} or its ordinal", self.0.join(", "))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            self.ordinal(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            self.ordinal(i64::try_from(v).unwrap_or(i64::MAX))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(self
                .0
                .iter()
                .find(|n| n.eq_ignore_ascii_case(v))
                .map_or_else(String::new, |n| (*n).to_owned()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    d.deserialize_any(Name(names))
}

/// Java's `Integer.parseInt`/`Long.parseLong` digits: an optional sign,
/// then decimal digits only.
fn parse_decimal(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    const MODELS: &[&str] = &["BROADCASTING", "CLUSTERING"];

    fn model<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        enum_name(d, MODELS)
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Probe {
        #[serde(deserialize_with = "int")]
        i: i32,
        #[serde(deserialize_with = "int")]
        l: i64,
        #[serde(deserialize_with = "boolean")]
        b: bool,
        #[serde(deserialize_with = "string")]
        s: String,
        #[serde(deserialize_with = "model")]
        e: String,
        #[serde(deserialize_with = "double")]
        d: f64,
        #[serde(deserialize_with = "int_list")]
        codes: Vec<i32>,
        #[serde(deserialize_with = "list")]
        names: Vec<String>,
    }

    fn probe(json: &str) -> Result<Probe, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn integers_read_as_fastjson_reads_them() {
        for (json, want) in [
            (r#"{"i":12}"#, 12),
            (r#"{"i":"12"}"#, 12),
            (r#"{"i":"-7"}"#, -7),
            (r#"{"i":"+7"}"#, 7),
            (r#"{"i":1.5}"#, 1),
            (r#"{"i":-1.5}"#, -1),
            (r#"{"i":true}"#, 1),
            (r#"{"i":""}"#, 0),
            (r#"{"i":"null"}"#, 0),
            (r#"{"i":null}"#, 0),
        ] {
            assert_eq!(probe(json).unwrap().i, want, "{json}");
        }
        for json in [
            r#"{"i":" 12"}"#,
            r#"{"i":"1.5"}"#,
            r#"{"i":"0x10"}"#,
            r#"{"i":"abc"}"#,
            r#"{"i":4294967296}"#,
            r#"{"i":[1]}"#,
        ] {
            assert!(probe(json).is_err(), "{json}");
        }
        assert_eq!(
            probe(r#"{"l":"1700000000000123"}"#).unwrap().l,
            1_700_000_000_000_123
        );
    }

    #[test]
    fn doubles_read_as_fastjson_reads_them() {
        for (json, want) in [
            ("1.5", 1.5),
            ("2", 2.0),
            (r#""0.25""#, 0.25),
            (r#""-3""#, -3.0),
            ("true", 1.0),
            (r#""""#, 0.0),
            ("null", 0.0),
        ] {
            let got = probe(&format!(r#"{{"d":{json}}}"#)).unwrap().d;
            assert!((got - want).abs() < f64::EPSILON, "{json}: {got}");
        }
        for json in [r#""abc""#, "[1]", "{}"] {
            assert!(probe(&format!(r#"{{"d":{json}}}"#)).is_err(), "{json}");
        }
    }

    #[test]
    fn booleans_read_as_fastjson_reads_them() {
        for json in [
            "true",
            r#""true""#,
            r#""TRUE""#,
            r#""1""#,
            r#""T""#,
            r#""Y""#,
            "1",
            "1.0",
        ] {
            assert!(probe(&format!(r#"{{"b":{json}}}"#)).unwrap().b, "{json}");
        }
        for json in [
            "false",
            r#""false""#,
            r#""0""#,
            r#""F""#,
            r#""N""#,
            r#""""#,
            "0",
            "2",
            "null",
        ] {
            assert!(!probe(&format!(r#"{{"b":{json}}}"#)).unwrap().b, "{json}");
        }
        for json in [r#""yes""#, r#""2""#, r#""abc""#] {
            assert!(probe(&format!(r#"{{"b":{json}}}"#)).is_err(), "{json}");
        }
    }

    #[test]
    fn enums_read_by_name_in_any_case_or_by_ordinal() {
        for (json, want) in [
            (r#""CLUSTERING""#, "CLUSTERING"),
            (r#""clustering""#, "CLUSTERING"),
            (r#""Clustering""#, "CLUSTERING"),
            ("0", "BROADCASTING"),
            ("1", "CLUSTERING"),
            (r#""1""#, ""),
            (r#""UNKNOWN""#, ""),
            (r#""""#, ""),
            ("null", ""),
        ] {
            assert_eq!(
                probe(&format!(r#"{{"e":{json}}}"#)).unwrap().e,
                want,
                "{json}"
            );
        }
        for json in ["7", "-1"] {
            assert!(probe(&format!(r#"{{"e":{json}}}"#)).is_err(), "{json}");
        }
    }

    #[test]
    fn strings_lists_and_code_sets_are_lenient_too() {
        let p = probe(r#"{"s":1700000000000,"codes":["65","-66",67,""],"names":null}"#).unwrap();
        assert_eq!(p.s, "1700000000000");
        assert_eq!(p.codes, [65, -66, 67]);
        assert!(p.names.is_empty());
        assert_eq!(probe(r#"{"s":true}"#).unwrap().s, "true");
        assert!(probe(r#"{"codes":["abc"]}"#).is_err());
        assert!(probe(r#"{"codes":["4294967296"]}"#).is_err());
        assert!(probe(r#"{"names":"a"}"#).is_err());
    }
}
