//! Results folders that hold one run's outputs: each lists what it wrote, and the
//! next run into the same folder removes what it did not write again, and nothing
//! else.

use std::ffi::OsStr;
use std::io;
use std::path::Path;

/// The file in a results folder that lists what the last run wrote there.
pub const MANIFEST: &str = ".longhaul-outputs";

/// Records `written` as the outputs of `dir`, and removes every output that the
/// previous run listed there and this one did not write again. So a folder given
/// again holds one run's results, not a mix: no `trace.csv` from a run that traced
/// beside the `summary.json` of one that did not, no plots of another grid, no
/// `point-0042/` of a sweep that now has 40 points.
///
/// A name is a plain file name inside `dir`, or a plain folder name with a trailing
/// `/` (`point-0042/`, `plots/`): a folder that holds its own list. A stale folder
/// loses what its list names (its own stale folders likewise), then the list, and
/// goes if that leaves it empty. Only what longhaul itself listed goes; any other
/// file, in `dir` or in a stale folder, is left alone, and so is any other name a
/// doctored list holds (`../x`, `a/b`).
pub fn replace_outputs(dir: &Path, written: &[String]) -> io::Result<()> {
    if let Some(previous) = read_manifest(dir)? {
        for name in previous.lines() {
            if !written.iter().any(|w| w == name) {
                remove_output(dir, name)?;
            }
        }
    }
    let mut list = written.join("\n");
    list.push('\n');
    std::fs::write(dir.join(MANIFEST), list)
}

/// The list of `dir`, if it has one.
fn read_manifest(dir: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(dir.join(MANIFEST)) {
        Ok(list) => Ok(Some(list)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes output `name` of `dir` (see [`replace_outputs`]); names of any other form
/// are ignored, and what is already gone is no error.
fn remove_output(dir: &Path, name: &str) -> io::Result<()> {
    let plain = |n: &str| !n.is_empty() && Path::new(n).file_name() == Some(OsStr::new(n));
    let gone = |r: io::Result<()>| match r {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    if let Some(folder) = name.strip_suffix('/') {
        if !plain(folder) {
            return Ok(());
        }
        let sub = dir.join(folder);
        // A symbolic link in the folder's place is not longhaul's folder.
        if !std::fs::symlink_metadata(&sub).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        if let Some(list) = read_manifest(&sub)? {
            for inner in list.lines() {
                remove_output(&sub, inner)?;
            }
            gone(std::fs::remove_file(sub.join(MANIFEST)))?;
        }
        // Left in place if anything else is in it: not ours to remove.
        let _ = std::fs::remove_dir(&sub);
        return Ok(());
    }
    let path = dir.join(name);
    // A folder where a file was listed is not longhaul's file.
    if plain(name) && !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        gone(std::fs::remove_file(path))?;
    }
    Ok(())
}
