//! The receiver's control listener: what a stranger can make it do.
//!
//! Every connection gets its own thread for the handshake, so one that says nothing,
//! or trickles a byte at a time, delays nobody else. Before a connection has proved
//! the token, the work it can cause is bounded: [`PRE_AUTH_DEADLINE`] for the whole
//! exchange (not per read), handshake messages of at most
//! [`crate::secure::handshake::MAX_HANDSHAKE_MSG`] bytes, a first record of at most
//! [`PRE_AUTH_RECORD`], at most [`MAX_PENDING`] connections in handshake at once and
//! [`MAX_PER_SOURCE`] from one address. What fails is logged with at most a short,
//! escaped prefix of what was sent, and the listener serves on: only authenticated
//! senders reach a session, so only they count towards `--sessions`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::super::control::{Control, Msg, Side, TimedStream, PROTOCOL_VERSION};
use super::super::TransferError;
use super::{lock_dir, serve_session, RecvOptions, RecvSummary};
use crate::secure::{self, handshake_responder, Preamble, SessionKeys};

/// How long a connection has, from its accept, to complete the handshake and send
/// its first record.
pub const PRE_AUTH_DEADLINE: Duration = Duration::from_secs(10);
/// The largest record taken before the peer has authenticated.
pub const PRE_AUTH_RECORD: usize = 4096;
/// How often, ms, a listener with nothing to accept checks that its server lives.
const STOP_CHECK_MS: u16 = 50;
/// Connections in handshake at once; more are closed at once.
pub const MAX_PENDING: usize = 64;
/// Connections in handshake at once from one address.
pub const MAX_PER_SOURCE: usize = 8;

/// A sender that has proved the token: its control channel and the session's keys.
pub(super) struct Authenticated {
    pub ctl: Control,
    pub keys: SessionKeys,
    pub peer: SocketAddr,
}

/// Where the receiver says what strangers did (one line each); by default nowhere.
#[derive(Clone)]
pub struct Log(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log(..)")
    }
}

/// A listening receiver: sessions one after another on one control port, so a
/// sender never finds it shut between them.
pub struct Server {
    addr: SocketAddr,
    sessions: Mutex<mpsc::Receiver<Authenticated>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
    strangers: Arc<AtomicU64>,
}

impl Server {
    /// Listens on `opts.listen` and starts taking handshakes.
    pub fn bind(opts: &RecvOptions) -> Result<Server, TransferError> {
        secure::check_token(&opts.token).map_err(TransferError::WeakToken)?;
        let listener = TcpListener::bind(opts.listen)
            .map_err(TransferError::io(format!("listening on {}", opts.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(TransferError::io("listening"))?;
        listener
            .set_nonblocking(true)
            .map_err(TransferError::io("listening"))?;
        let (tx, rx) = mpsc::sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let strangers = Arc::new(AtomicU64::new(0));
        let acceptor = {
            let (stop, strangers) = (stop.clone(), strangers.clone());
            let gate = Gate {
                psk: secure::psk(&opts.token),
                preamble: Preamble {
                    version: PROTOCOL_VERSION,
                    encrypt: opts.encrypt,
                },
                timeout: opts.timeout,
                log: opts.log.clone(),
                strangers,
            };
            thread::spawn(move || accept_loop(listener, gate, tx, &stop))
        };
        Ok(Server {
            addr,
            sessions: Mutex::new(rx),
            stop,
            acceptor: Some(acceptor),
            strangers,
        })
    }

    /// The control address (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections turned away before authentication so far.
    pub fn strangers(&self) -> u64 {
        self.strangers.load(Ordering::Relaxed)
    }

    /// Waits for the next authenticated sender and serves its session into
    /// `opts.dir` (`opts.listen` and `opts.token` are the server's own).
    pub fn serve_one(&self, opts: &RecvOptions) -> Result<RecvSummary, TransferError> {
        let dir_lock = lock_dir(opts)?;
        self.serve_one_holding(opts, dir_lock)
    }

    /// [`serve_one`](Self::serve_one) with the directory already held.
    pub(super) fn serve_one_holding(
        &self,
        opts: &RecvOptions,
        dir_lock: Option<std::sync::Arc<nix::fcntl::Flock<std::fs::File>>>,
    ) -> Result<RecvSummary, TransferError> {
        let auth = self
            .sessions
            .lock()
            .expect("no panics hold it")
            .recv()
            .map_err(|_| TransferError::Protocol("the control listener stopped".into()))?;
        serve_session(auth, opts, dir_lock)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// What every handshake thread needs.
#[derive(Clone)]
struct Gate {
    psk: [u8; 32],
    preamble: Preamble,
    timeout: Duration,
    log: Option<Log>,
    strangers: Arc<AtomicU64>,
}

impl Gate {
    fn log(&self, line: &str) {
        if let Some(l) = &self.log {
            (l.0)(line);
        }
    }

    /// Runs the handshake on `tcp` and reads the sender's first record, all within
    /// [`PRE_AUTH_DEADLINE`].
    fn admit(&self, tcp: TcpStream) -> Result<(Control, SessionKeys), TransferError> {
        let io = || TransferError::io("control channel");
        tcp.set_nonblocking(false).map_err(io())?;
        tcp.set_write_timeout(Some(PRE_AUTH_DEADLINE))
            .map_err(io())?;
        let mut stream = TimedStream::new(tcp);
        stream.set_deadline(PRE_AUTH_DEADLINE);
        let keys = handshake_responder(&mut stream, &self.psk, self.preamble)?;
        let mut ctl = Control::new(stream, &keys, Side::Receiver, PRE_AUTH_RECORD)?;
        match ctl.recv_limited(PRE_AUTH_RECORD as u64)? {
            Msg::Hello { version } if version == PROTOCOL_VERSION => {}
            m => {
                return Err(TransferError::Protocol(format!(
                    "expected hello, got {}",
                    secure::escaped_prefix(format!("{m:?}").as_bytes(), 60)
                )))
            }
        }
        ctl.trust();
        let s = ctl.stream();
        s.set_write_timeout(None).map_err(io())?;
        // Until the offer, a step's wait; the data phase sets its own.
        s.set_read_timeout(Some(self.timeout)).map_err(io())?;
        Ok((ctl, keys))
    }
}

/// Connections in handshake, per source address.
#[derive(Default)]
struct Pending {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// Takes a slot in `pending` for `ip`, or says why not.
fn take_slot(pending: &Mutex<Pending>, ip: IpAddr) -> Result<(), String> {
    let mut p = pending.lock().expect("no panics hold it");
    if p.total >= MAX_PENDING {
        return Err(format!(
            "{MAX_PENDING} connections are in handshake already"
        ));
    }
    let n = p.by_source.entry(ip).or_insert(0);
    if *n >= MAX_PER_SOURCE {
        return Err(format!(
            "{MAX_PER_SOURCE} connections from {ip} are in handshake already"
        ));
    }
    *n += 1;
    p.total += 1;
    Ok(())
}

fn free_slot(pending: &Mutex<Pending>, ip: IpAddr) {
    let mut p = pending.lock().expect("no panics hold it");
    p.total -= 1;
    if let Some(n) = p.by_source.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            p.by_source.remove(&ip);
        }
    }
}

/// Accepts until `stop`, each connection's handshake on a thread of its own.
fn accept_loop(
    listener: TcpListener,
    gate: Gate,
    sessions: mpsc::SyncSender<Authenticated>,
    stop: &AtomicBool,
) {
    let pending = Arc::new(Mutex::new(Pending::default()));
    while !stop.load(Ordering::Relaxed) {
        let (tcp, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Sleep until a connection comes (no latency added to it), waking
                // every STOP_CHECK to see whether the server was dropped.
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::from(STOP_CHECK_MS));
                continue;
            }
            Err(e) => {
                gate.log(&format!("accepting a control connection: {e}"));
                // Out of descriptors, say: do not spin.
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if let Err(why) = take_slot(&pending, peer.ip()) {
            gate.strangers.fetch_add(1, Ordering::Relaxed);
            gate.log(&format!("{peer}: closed at once: {why}"));
            continue;
        }
        let (gate, pending, sessions) = (gate.clone(), pending.clone(), sessions.clone());
        thread::spawn(move || {
            let admitted = gate.admit(tcp);
            free_slot(&pending, peer.ip());
            match admitted {
                Ok((ctl, keys)) => {
                    // Waits while a session runs; gone if the server is.
                    let _ = sessions.send(Authenticated { ctl, keys, peer });
                }
                Err(e) => {
                    gate.strangers.fetch_add(1, Ordering::Relaxed);
                    gate.log(&format!("{peer}: turned away before authentication: {e}"));
                }
            }
        });
    }
}
