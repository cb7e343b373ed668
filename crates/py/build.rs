//! Embeds the repository's studies (`studies/<name>/*.toml` and `README.md`) into the
//! extension, so `longhaul.study("ar-udt")` runs from an installed wheel, which has
//! no repository beside it.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut studies: Vec<_> = std::fs::read_dir(&root)
        .expect("studies/ beside crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    studies.sort();
    let mut out = String::from("/// (study, [(file, contents)]), by name.\npub static STUDIES: &[(&str, &[(&str, &str)])] = &[\n");
    for dir in studies {
        println!("cargo:rerun-if-changed={}", dir.display());
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "toml")
                    || p.file_name().is_some_and(|n| n == "README.md")
            })
            .collect();
        files.sort();
        let _ = writeln!(out, "    ({name:?}, &[");
        for f in files {
            println!("cargo:rerun-if-changed={}", f.display());
            let file = f.file_name().unwrap().to_string_lossy().into_owned();
            let path = f.canonicalize().unwrap();
            let _ = writeln!(
                out,
                "        ({file:?}, include_str!({:?})),",
                path.display().to_string()
            );
        }
        out.push_str("    ]),\n");
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("studies.rs");
    std::fs::write(dest, out).unwrap();
}
