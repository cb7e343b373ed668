//! The control channel's reading side during the data phase: verdicts, blocks
//! asked for again, the receiver's progress.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::super::control::{ControlReader, ControlWriter, Msg};
use super::super::TransferError;
use super::sched::{Digest, Shared};
use super::source::read_block;

pub(super) fn send_digest(
    writer: &Mutex<ControlWriter>,
    file: usize,
    d: Digest,
) -> Result<(), TransferError> {
    writer
        .lock()
        .expect("no panics hold it")
        .send(&Msg::Digest {
            file: file as u32,
            digest: hex::encode(d.digest),
            changed: d.changed,
            replaced: d.replaced,
        })
}

/// What the verdict thread needs to send a block again.
pub(super) struct Resends {
    pub sources: Arc<Vec<PathBuf>>,
    pub sizes: Vec<u64>,
    pub block_size: u32,
    pub block_key: [u8; 32],
}

/// The control channel's reading side for the whole data phase: records each
/// file's verdict (waking a channel group that waits for it), answers resend
/// requests, and ends at `Finished`. Returns the failed files and the blocks resent.
pub(super) fn verdicts(
    mut reader: ControlReader,
    shared: &Shared,
    writer: &Mutex<ControlWriter>,
    files: &Resends,
    progress: Option<Arc<AtomicU64>>,
) -> Result<(Vec<usize>, u64), TransferError> {
    let Resends {
        sources,
        sizes,
        block_size,
        block_key,
    } = files;
    let block_size = *block_size;
    let mut serve = || -> Result<(Vec<usize>, u64), TransferError> {
        let (mut bad, mut resent) = (vec![], 0);
        loop {
            let m = reader.recv()?;
            match m {
                Msg::FileDone { file, ok } => {
                    let mut s = shared.lock().expect("no panics hold it");
                    let Some(f) = s.files.get_mut(file as usize) else {
                        return Err(TransferError::Protocol(format!(
                            "a verdict for file {file}, which was not offered"
                        )));
                    };
                    f.done = Some(ok);
                    s.log(format_args!(
                        "done {file} {}",
                        if ok { "ok" } else { "failed" }
                    ));
                    if !ok {
                        bad.push(file as usize);
                    }
                }
                Msg::Resend { blocks } => {
                    for (file, offset, len) in blocks {
                        let known = (file as usize) < sources.len()
                            && offset.saturating_add(u64::from(len)) <= sizes[file as usize]
                            && len <= block_size;
                        if !known {
                            return Err(TransferError::Protocol(format!(
                                "asked again for block {file}@{offset}, which was never sent"
                            )));
                        }
                        let mut data = vec![0u8; len as usize];
                        read_block(sources, &mut None, file, &mut data, offset)?;
                        let hash = blake3::keyed_hash(block_key, &data);
                        writer.lock().expect("no panics hold it").send_with(
                            &Msg::Block { file, offset, len },
                            &[&data, hash.as_bytes()],
                        )?;
                        resent += 1;
                    }
                }
                Msg::Progress { bytes } => {
                    if let Some(p) = &progress {
                        p.store(bytes, Ordering::Relaxed);
                    }
                }
                Msg::Finished => return Ok((bad, resent)),
                Msg::Reject { reason } => return Err(TransferError::ReceiverGaveUp(reason)),
                m => return Err(TransferError::Protocol(format!("unexpected {m:?}"))),
            }
        }
    };
    let result = serve();
    if let Err(e) = &result {
        // The channels must not wait for verdicts that will not come.
        shared.lock().expect("no panics hold it").abort = Some(e.to_string());
    }
    result
}
