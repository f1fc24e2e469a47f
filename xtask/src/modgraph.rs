//! Which top-level modules of a crate import which: the `crate::...` paths
//! of each file (tests and comments aside), and the loops among them.
//!
//! A file's module is the first component of its path under `src/`
//! (`processor/admin.rs` belongs to `processor`); `lib.rs` and `main.rs`
//! are the root, which may use every module and is never part of a loop.

use std::collections::{BTreeMap, BTreeSet};

/// Module name to the modules it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the source files `(path under src/, text)`.
pub fn graph<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Graph {
    let mut graph = Graph::new();
    for (path, text) in files {
        let top = path.split('/').next().unwrap_or(path);
        let module = top.strip_suffix(".rs").unwrap_or(top);
        if matches!(module, "lib" | "main") {
            continue;
        }
        let imports = graph.entry(module.to_owned()).or_default();
        for name in crate_paths(text) {
            if name != module {
                imports.insert(name);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for imports in graph.values_mut() {
        imports.retain(|m| modules.contains(m));
    }
    graph
}

/// Each loop once, as the sorted list of modules that reach each other.
pub fn loops(graph: &Graph) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<String>> =
        graph.keys().map(|m| (m.as_str(), reach(m))).collect();
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, seen) in &reaches {
        if !seen.contains(*m) {
            continue;
        }
        let members: Vec<String> = seen
            .iter()
            .filter(|other| reaches.get(other.as_str()).is_some_and(|s| s.contains(*m)))
            .cloned()
            .collect();
        out.insert(members);
    }
    out.into_iter().collect()
}

/// The first component of every `crate::` path in `text`, before its
/// first `#[cfg(test)]` and outside `//` comments; `crate::{a, b::c}`
/// yields `a` and `b`.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(group_heads(group));
        } else {
            out.insert(identifier(rest).to_owned());
        }
    }
    out.remove("");
    out
}

/// The first path component of each item of a `{...}` use group whose
/// opening brace has been consumed.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if at_item_start && (c.is_alphanumeric() || c == '_') => {
                heads.push(identifier(&group[i..]).to_owned());
                at_item_start = false;
            }
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_use_groups_name_their_first_module() {
        let text = "//! Doc naming crate::nothing.\n\
                    use crate::{a::X, b, c::{d, e}};\n\
                    fn f() { crate::g::h(); notcrate::i(); } // crate::j\n\
                    #[cfg(test)]\nmod tests { use crate::k; }\n";
        let found: Vec<String> = crate_paths(text).into_iter().collect();
        assert_eq!(found, ["a", "b", "c", "g"]);
    }

    #[test]
    fn a_loop_between_modules_is_found_once_and_the_root_is_ignored() {
        let files = [
            ("lib.rs", "use crate::{state, executor};"),
            ("state.rs", "use crate::request::Job;"),
            ("request.rs", ""),
            ("executor.rs", "use crate::{processor, state};"),
            ("processor/mod.rs", "use crate::state::State;"),
            (
                "processor/admin.rs",
                "use crate::{processor::bad, request};",
            ),
        ];
        let clean = graph(files);
        assert!(loops(&clean).is_empty(), "{clean:?}");
        assert_eq!(
            clean["processor"],
            BTreeSet::from(["request".to_owned(), "state".to_owned()])
        );

        let mut looped = files.to_vec();
        looped[1] = ("state.rs", "use crate::{request::Job, processor};");
        assert_eq!(loops(&graph(looped)), [["processor", "state"]]);
    }
}
