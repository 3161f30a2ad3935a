//! Gathers the Rust blocks of README.md and docs/*.md for
//! `tests/docs_compile.rs`: each block becomes the body of an async function
//! whose parameters are what a block may take from the text around it
//! (`config`, `pool`, `queue`, `client`), over a prelude of the names the
//! documents take as given (`Email`, `send`, `shutdown_signal`, …). The
//! functions are compiled, never run: a block that does not compile fails
//! the build of that test.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs = vec![root.join("README.md")];
    let mut more: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    let mut out = String::new();
    let mut count = 0;
    for doc in &docs {
        println!("cargo:rerun-if-changed={}", doc.display());
        let text = std::fs::read_to_string(doc).expect("a document");
        let blocks = rust_blocks(&text);
        if blocks.is_empty() {
            continue;
        }
        let name: String = doc
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        writeln!(out, "#[allow(unused, unreachable_code, clippy::all)]").unwrap();
        writeln!(
            out,
            "mod {} {{\n    use super::prelude::*;",
            name.to_lowercase()
        )
        .unwrap();
        for (line, body) in &blocks {
            writeln!(out, "    // {}:{line}", doc.display()).unwrap();
            writeln!(
                out,
                "    pub async fn line_{line}(config: Config, pool: sqlx::AnyPool, queue: Queue, client: Client) \
                 -> Result<(), Box<dyn std::error::Error>> {{"
            )
            .unwrap();
            out.push_str(body);
            writeln!(out, "        Ok(())\n    }}").unwrap();
            count += 1;
        }
        writeln!(out, "}}").unwrap();
    }
    writeln!(out, "pub const BLOCKS: usize = {count};").unwrap();
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("doc_blocks.rs");
    std::fs::write(dest, out).unwrap();
}

/// The ```rust blocks of a Markdown text: (first line number, body).
fn rust_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match &mut cur {
            None if fence && line.trim() == "```rust" => cur = Some((i + 2, String::new())),
            Some(_) if fence => out.push(cur.take().unwrap()),
            Some((_, body)) => {
                body.push_str("        ");
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    out
}
