//! The receiver's file-system operations, confined beneath one directory handle.
//!
//! The destination is opened once; every folder under it is reached from that handle
//! one name at a time with `O_NOFOLLOW | O_DIRECTORY` (`openat(2)`), and every file,
//! rename and removal is done relative to the handle of its own folder, never by a
//! path string resolved again later. So a symbolic link planted in the destination
//! (at a file's name, at a working file's name, or in place of a folder the receiver
//! made, swapped in while the session runs) cannot redirect a write outside it: a
//! link met on the way fails the open (`ELOOP`/`ENOTDIR`), and a folder swapped after
//! its handle was opened is no longer on the way at all.
//!
//! What it does not do: it does not stop a local user who can write to the
//! destination from moving the receiver's own folders elsewhere (the files then land
//! where that folder went, as with any program), nor from deleting its files.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A folder beneath the destination, held open.
#[derive(Debug)]
pub(crate) struct DirHandle {
    fd: OwnedFd,
    /// How it is shown in messages (the path it had when opened).
    shown: PathBuf,
}

/// What is at a name in a folder, without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    File(u64),
    Dir,
    /// A symbolic link, a device, a socket, a FIFO.
    Other,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl DirHandle {
    /// The destination itself (followed if it is a link: the user named it).
    pub fn open_root(path: &Path) -> io::Result<Arc<Self>> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Arc::new(DirHandle {
            fd,
            shown: path.to_path_buf(),
        }))
    }

    /// The folder `components` beneath this one, each opened without following a
    /// link; with `create`, a missing one is made with that mode (less the umask).
    pub fn descend(&self, components: &[&str], create: Option<u32>) -> io::Result<Arc<Self>> {
        let mut shown = self.shown.clone();
        let mut cur: Option<OwnedFd> = None;
        for c in components {
            shown.push(c);
            let parent = cur.as_ref().unwrap_or(&self.fd);
            let opened = match rustix::fs::openat(parent, *c, DIR_FLAGS, Mode::empty()) {
                Err(rustix::io::Errno::NOENT) if create.is_some() => {
                    let mode = Mode::from_raw_mode(create.expect("checked") & 0o7777);
                    match rustix::fs::mkdirat(parent, *c, mode) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(with_path(e.into(), &shown)),
                    }
                    rustix::fs::openat(parent, *c, DIR_FLAGS, Mode::empty())
                }
                r => r,
            };
            cur = Some(opened.map_err(|e| with_path(refused(e), &shown))?);
        }
        Ok(Arc::new(DirHandle {
            fd: match cur {
                Some(fd) => fd,
                None => rustix::io::dup(&self.fd)?,
            },
            shown,
        }))
    }

    /// `name` in this folder, as shown in messages.
    pub fn shown(&self, name: &str) -> PathBuf {
        self.shown.join(name)
    }

    /// What is at `name`, if anything (a link is reported as itself).
    pub fn entry(&self, name: &str) -> io::Result<Option<Entry>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Entry::File(st.st_size as u64),
                FileType::Directory => Entry::Dir,
                _ => Entry::Other,
            })),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(with_path(e.into(), &self.shown(name))),
        }
    }

    /// Opens the file `name` for reading; a link there is refused.
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        self.open(name, OFlags::RDONLY, 0)
    }

    /// Opens the existing file `name` with `flags` (read/write, append); a link
    /// there is refused.
    pub fn open(&self, name: &str, flags: OFlags, mode: u32) -> io::Result<File> {
        rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map(File::from)
        .map_err(|e| with_path(refused(e), &self.shown(name)))
    }

    /// Makes `name` a new, empty file of `mode`, opened read-write: whatever was at
    /// that name (a leftover file, a planted link) is removed first, and the file
    /// is created exclusively, so the descriptor is of a file this call made here.
    pub fn create_fresh(&self, name: &str, mode: u32) -> io::Result<File> {
        self.remove(name)?;
        self.open(name, OFlags::RDWR | OFlags::CREATE | OFlags::EXCL, mode)
    }

    /// Removes the file (or link) `name`, if there is one.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(with_path(e.into(), &self.shown(name))),
        }
    }

    /// Renames `from` to `to`, both in this folder (replacing what is at `to`: a
    /// link there is replaced, never followed).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to)
            .map_err(|e| with_path(e.into(), &self.shown(to)))
    }

    /// Flushes the file system this folder is on (`syncfs(2)`).
    pub fn syncfs(&self) -> io::Result<()> {
        rustix::fs::syncfs(&self.fd).map_err(|e| with_path(e.into(), &self.shown))
    }

    /// Makes this folder's entries (names made, renamed, removed) durable
    /// (`fsync(2)` on the folder).
    pub fn fsync(&self) -> io::Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| with_path(e.into(), &self.shown))
    }
}

/// A link where a file or folder was expected reads as what it is.
fn refused(e: rustix::io::Errno) -> io::Error {
    match e {
        rustix::io::Errno::LOOP => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a symbolic link is in the way (the receiver never follows one)",
        ),
        rustix::io::Errno::NOTDIR => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a file or a symbolic link is where a folder must be (the receiver never follows a link)",
        ),
        e => e.into(),
    }
}

fn with_path(e: io::Error, p: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// The longest file name the file systems we write to take (`NAME_MAX`), bytes.
pub(crate) const NAME_MAX: usize = 255;

/// The name of a receiver's working file beside `name`: `.NAME` and `suffix`, or,
/// when that would pass [`NAME_MAX`], as much of `name` as fits, `~`, and 16 hex
/// digits of its BLAKE3 hash, so a legal name of up to 255 bytes still has working
/// files, and the same name always gets the same ones (a resume finds them).
pub(crate) fn working_name(name: &str, suffix: &str) -> String {
    let plain = format!(".{name}{suffix}");
    if plain.len() <= NAME_MAX {
        return plain;
    }
    let hash = blake3::hash(name.as_bytes()).to_hex();
    let tag = format!("~{}", &hash[..16]);
    let mut room = NAME_MAX - 1 - tag.len() - suffix.len();
    while !name.is_char_boundary(room) {
        room -= 1;
    }
    format!(".{}{tag}{suffix}", &name[..room])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::symlink;

    /// Links at a file's name, in a folder's place or on the way are refused or
    /// replaced, never followed: nothing lands outside.
    #[test]
    fn links_are_never_followed() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = DirHandle::open_root(root.path()).unwrap();
        symlink(outside.path(), root.path().join("sub")).unwrap();
        let e = r.descend(&["sub"], Some(0o755)).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = r.descend(&["sub", "deeper"], Some(0o755)).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, root.path().join(".f.part")).unwrap();
        assert!(r.open(".f.part", OFlags::WRONLY, 0).is_err());
        assert!(r.open_read(".f.part").is_err());
        let mut f = r.create_fresh(".f.part", 0o600).unwrap();
        f.write_all(b"data").unwrap();
        symlink(&victim, root.path().join("f")).unwrap();
        r.rename(".f.part", "f").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(root.path().join("f")).unwrap(), b"data");
        assert_eq!(r.entry("f").unwrap(), Some(Entry::File(4)));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    /// A folder swapped for a link after its handle was opened is not on the way:
    /// writes go to the folder the handle holds.
    #[test]
    fn a_folder_swapped_for_a_link_is_not_followed() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = DirHandle::open_root(root.path()).unwrap();
        let sub = r.descend(&["a", "b"], Some(0o755)).unwrap();
        std::fs::rename(root.path().join("a"), root.path().join("a.moved")).unwrap();
        symlink(outside.path(), root.path().join("a")).unwrap();
        sub.create_fresh("x", 0o644).unwrap();
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(root.path().join("a.moved/b/x").exists());
    }

    #[test]
    fn working_names_fit_name_max_and_are_stable() {
        assert_eq!(
            working_name("x.dat", ".longhaul-part"),
            ".x.dat.longhaul-part"
        );
        for len in [230, 240, 241, 254, 255] {
            let name = "é".repeat(len / 2) + &"n".repeat(len % 2);
            assert_eq!(name.len(), len);
            for suffix in [".longhaul-part", ".longhaul-journal.new"] {
                let w = working_name(&name, suffix);
                assert!(w.len() <= NAME_MAX, "{len}: {}", w.len());
                assert!(w.starts_with('.') && w.ends_with(suffix));
                assert_eq!(w, working_name(&name, suffix), "stable");
            }
        }
        let a = "a".repeat(250);
        let b = "a".repeat(249) + "b";
        assert_ne!(
            working_name(&a, ".longhaul-part"),
            working_name(&b, ".longhaul-part")
        );
    }
}
