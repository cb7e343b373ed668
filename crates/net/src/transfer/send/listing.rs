//! What a sender sends: the files and folders under the paths given, what is left
//! out and why, and names the receiver could not all write.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::{name_clash, NameClash, TransferError};

/// What [`list_files`] found.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The files to send, sorted by name.
    pub files: Vec<ListedFile>,
    /// The folders, sorted by name: made at the receiver even if empty.
    pub dirs: Vec<ListedDir>,
    /// What is inside the directories given but not sent, and why.
    pub skipped: Vec<(PathBuf, Skip)>,
}

/// A file to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Where it is read from (empty for the generated file).
    pub source: PathBuf,
    /// Its `/`-separated name at the receiver.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Permission bits (`0o777`), which the receiver gives its copy (less its umask,
    /// as `cp` and `scp` do): a private file stays private.
    pub mode: u32,
    /// Modification time (seconds and nanoseconds since the Unix epoch), which
    /// the receiver gives its copy; `None` for the generated file.
    pub mtime: Option<(i64, u32)>,
}

/// A folder to make at the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedDir {
    /// Its `/`-separated name at the receiver.
    pub name: String,
    /// Permission bits (`0o777`), as for a file.
    pub mode: u32,
}

/// Why a path inside a directory given is not sent. (A path given itself is sent,
/// or is an error.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A symbolic link or a special file: links inside a tree are not followed
    /// (one could lead outside it, or round a loop); links given are.
    Special,
    /// The form of a receiver's working files ([`super::super::is_working_file`]), which
    /// no receiver accepts: left over from an interrupted session in a tree being
    /// sent on.
    Partial,
    /// A name that is not UTF-8, which the protocol's names are: it would arrive
    /// renamed. A directory so named is left out whole.
    NotUtf8,
}

/// The files under `paths`, and what is left out.
pub fn list_files(paths: &[PathBuf]) -> Result<Listing, TransferError> {
    fn walk(p: &Path, name: String, top: bool, out: &mut Listing) -> Result<(), TransferError> {
        // A path the user named is followed if it is a link (as `cp -H` does); the
        // links inside a tree are not: one could lead outside it, or round a loop.
        let m = if top {
            std::fs::metadata(p)
        } else {
            std::fs::symlink_metadata(p)
        }
        .map_err(TransferError::io(p.display().to_string()))?;
        if m.is_dir() {
            out.dirs.push(ListedDir {
                name: name.clone(),
                mode: m.permissions().mode() & 0o777,
            });
            for e in std::fs::read_dir(p).map_err(TransferError::io(p.display().to_string()))? {
                let e = e.map_err(TransferError::io(p.display().to_string()))?;
                match e.file_name().into_string() {
                    Ok(child) => walk(&e.path(), format!("{name}/{child}"), false, out)?,
                    Err(_) => out.skipped.push((e.path(), Skip::NotUtf8)),
                }
            }
        } else if m.is_file() {
            let file_name = name.rsplit('/').next().unwrap_or(&name);
            if !super::super::is_working_file(file_name) {
                out.files.push(ListedFile {
                    source: p.to_path_buf(),
                    name,
                    size: m.len(),
                    mode: m.permissions().mode() & 0o777,
                    mtime: Some((m.mtime(), m.mtime_nsec() as u32)),
                });
            } else if top {
                return Err(TransferError::Source(format!(
                    "{}: has the form of a longhaul receiver's partial file \
                     (.NAME.longhaul-part, .NAME.longhaul-journal), which no receiver \
                     accepts; rename it to send it",
                    p.display()
                )));
            } else {
                out.skipped.push((p.to_path_buf(), Skip::Partial));
            }
        } else if top {
            return Err(TransferError::Source(format!(
                "{}: not a regular file or a directory (only those are sent)",
                p.display()
            )));
        } else {
            out.skipped.push((p.to_path_buf(), Skip::Special));
        }
        Ok(())
    }
    let mut out = Listing::default();
    for p in paths {
        let name = p
            .canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|n| n.to_owned()))
            .ok_or_else(|| {
                TransferError::Source(format!("{}: no such file or directory", p.display()))
            })?
            .into_string()
            .map_err(|_| {
                TransferError::Source(format!(
                    "{}: its name is not UTF-8, which names in longhaul's protocol are; \
                     rename it to send it",
                    p.display()
                ))
            })?;
        walk(p, name, true, &mut out)?;
    }
    out.files.sort_by(|a, b| a.name.cmp(&b.name));
    out.dirs.sort_by(|a, b| a.name.cmp(&b.name));
    out.dirs.dedup_by(|a, b| a.name == b.name); // one folder given twice: its files clash below
    check_names(&out.files, &out.dirs)?;
    Ok(out)
}

/// Refuses a listing whose names the receiver could not all write ([`name_clash`]):
/// two files of one name (`a/x` and `b/x` given together), or a file whose name is
/// a folder's, or a folder of another's (a file `d` and a folder `d` given
/// together). The message names the paths given.
fn check_names(files: &[ListedFile], dirs: &[ListedDir]) -> Result<(), TransferError> {
    let file_names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let dir_names: Vec<&str> = dirs.iter().map(|d| d.name.as_str()).collect();
    let Some(clash) = name_clash(&file_names, &dir_names) else {
        return Ok(());
    };
    // The sources of a name (two for a name given twice).
    let sources = |name: &str| -> Vec<String> {
        files
            .iter()
            .filter(|f| f.name == name)
            .map(|f| f.source.display().to_string())
            .collect()
    };
    let other_run = "send one of them in another run (a path given keeps only its last \
                     part as its name at the receiver)";
    Err(TransferError::Source(match clash {
        NameClash::Twice(name) => {
            let sources = sources(name);
            let each = if sources.len() == 2 { "both" } else { "all" };
            format!(
                "{} would {each} be `{name}` at the receiver: {other_run}",
                sources.join(" and ")
            )
        }
        NameClash::FileAndFolder(name) => format!(
            "{} would be `{name}` at the receiver, where a folder given is too: {other_run}",
            sources(name).join(" and ")
        ),
        NameClash::InsideFile { name, file } => format!(
            "`{name}` would be inside a folder `{file}` at the receiver, but {} is a file \
             of that name: {other_run}",
            sources(file).join(" and ")
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::{list_files, Skip};
    use std::path::PathBuf;

    /// A path given that is a link is followed; links inside a tree are listed as
    /// not sent (one could lead outside the tree, or round a loop); a path given
    /// that is neither a file nor a directory is refused. (A link given as the path
    /// used to send nothing, without a word.)
    #[test]
    fn links_given_are_followed_and_links_inside_are_listed_not_sent() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("a"), "aa").unwrap();
        std::fs::write(tree.join("sub/b"), "b").unwrap();
        symlink("/etc/hostname", tree.join("out")).unwrap();
        symlink(&tree, tree.join("sub/loop")).unwrap();
        let link = tmp.path().join("link");
        symlink(&tree, &link).unwrap();
        let l = list_files(std::slice::from_ref(&link)).unwrap();
        let names: Vec<(&str, u64)> = l.files.iter().map(|f| (f.name.as_str(), f.size)).collect();
        assert_eq!(names, [("tree/a", 2), ("tree/sub/b", 1)]);
        let mut skipped = l.skipped.clone();
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            skipped,
            [
                (link.join("out"), Skip::Special),
                (link.join("sub/loop"), Skip::Special)
            ]
        );
        let e = list_files(&[PathBuf::from("/dev/null")]).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    /// A receiver's working files in a tree, and names that are not UTF-8 (which
    /// would arrive renamed), are listed as not sent, with why; given by name, each
    /// is an error.
    #[test]
    fn partial_files_and_names_not_utf8_are_not_sent() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        let odd = std::ffi::OsStr::from_bytes(b"caf\xe9");
        std::fs::create_dir_all(tree.join(odd)).unwrap();
        for f in [
            "x",
            ".x.longhaul-part",
            ".x.longhaul-journal",
            "y.longhaul-part",
        ] {
            std::fs::write(tree.join(f), f).unwrap();
        }
        std::fs::write(tree.join(odd).join("inside"), "i").unwrap();
        let odd_file = tree.join(std::ffi::OsStr::from_bytes(b"n\xffo"));
        std::fs::write(&odd_file, "n").unwrap();
        let l = list_files(std::slice::from_ref(&tree)).unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["tree/x", "tree/y.longhaul-part"]);
        let mut skipped = l.skipped.clone();
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            skipped,
            [
                (tree.join(".x.longhaul-journal"), Skip::Partial),
                (tree.join(".x.longhaul-part"), Skip::Partial),
                (tree.join(odd), Skip::NotUtf8),
                (odd_file.clone(), Skip::NotUtf8),
            ]
        );
        let e = list_files(&[odd_file]).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        let e = list_files(&[tree.join(".x.longhaul-part")]).unwrap_err();
        assert!(e.to_string().contains("rename it to send it"), "{e}");
    }

    /// Names the receiver could not all write are refused before anything is sent,
    /// naming both sources.
    #[test]
    fn clashing_names_are_refused_naming_both_sources() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |rel: &str| tmp.path().join(rel);
        for d in ["a/d", "b", "c/d", "e"] {
            std::fs::create_dir_all(p(d)).unwrap();
        }
        for f in ["a/d/x", "a/x", "b/x", "c/d/y", "e/d", "a/d-1"] {
            std::fs::write(p(f), f).unwrap();
        }
        let refused = |paths: &[&str], want: &[String]| {
            let paths: Vec<PathBuf> = paths.iter().map(|r| p(r)).collect();
            let e = list_files(&paths).unwrap_err().to_string();
            for w in want {
                assert!(e.contains(w.as_str()), "{paths:?}: {e}");
            }
        };
        let shown = |rel: &str| p(rel).display().to_string();
        // Two files, one name.
        refused(&["a/x", "b/x"], &[shown("a/x"), shown("b/x"), "`x`".into()]);
        // The same path twice.
        refused(&["a/x", "a/x"], &["would both be `x`".into()]);
        // A file `d` and a folder `d` (with `d-1` sorting between them).
        refused(
            &["a/d", "a/d-1", "e/d"],
            &[shown("e/d"), "where a folder given is too".into()],
        );
        // Two folders of one name are fine while the files in them differ.
        let l = list_files(&[p("a/d"), p("c/d")]).unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["d/x", "d/y"]);
    }
}
