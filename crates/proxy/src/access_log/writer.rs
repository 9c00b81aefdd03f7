//! The writer thread: every [`FLUSH_EVERY`] it takes the records queued since its last
//! round, formats them into one reused buffer and writes that with one `write` call.
//!
//! It polls rather than wakes per record so that a request never pays for waking it (a
//! futex wake is a system call, dearer than the whole line). Reopen requests (SIGUSR1) are
//! left in [`Control`] and applied at the start of the next round. Its destination and
//! format never change: a reload that changes them starts another writer.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::thread;
use std::time::Duration;

use super::line::LineFormat;
use super::{CAPACITY, Record};

/// How long queued records wait at most before they are written.
pub(super) const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// A buffer this full is written out before the round ends.
const WRITE_AT: usize = 64 * 1024;

/// Where the lines go.
pub(super) enum Output {
    /// Nowhere: queued records are discarded (and none are queued while it is in place).
    Off,
    /// Standard output, shared with the diagnostic log (a whole batch is written under
    /// stdout's lock, so lines of the two never interleave mid-line).
    Stdout,
    /// A file opened for appending, and its path for reopening.
    File {
        /// The configured path.
        path: PathBuf,
        /// The open file.
        file: File,
    },
}

impl Output {
    /// Opens `path` for appending, creating it when missing.
    pub(super) fn open(path: &Path) -> io::Result<Output> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Output::File {
            path: path.to_owned(),
            file,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Output::Off => Ok(()),
            Output::Stdout => {
                let mut stdout = io::stdout().lock();
                stdout.write_all(bytes)?;
                stdout.flush()
            }
            // An unbuffered file: the batch is the buffer.
            Output::File { file, .. } => file.write_all(bytes),
        }
    }
}

/// What the log's handle and its thread share besides the queue.
#[derive(Default)]
pub(super) struct Control {
    /// Set to have the file reopened by its path at the next round (SIGUSR1).
    pub(super) reopen: AtomicBool,
    /// Set when the log closes: the thread writes what is queued and ends.
    pub(super) closing: AtomicBool,
    /// Records dropped because the queue was full, since the start.
    pub(super) dropped: AtomicU64,
}

/// Starts the thread writing `queue` to `output` as `lines` formats them.
pub(super) fn spawn(
    queue: Receiver<Record>,
    control: std::sync::Arc<Control>,
    output: Output,
    lines: LineFormat,
) -> io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("access-log".to_owned())
        .spawn(move || {
            Writer {
                queue,
                control,
                output,
                lines,
                reported: 0,
                buffer: Vec::with_capacity(WRITE_AT + 4096),
            }
            .run();
        })
}

/// The thread's state.
struct Writer {
    queue: Receiver<Record>,
    control: std::sync::Arc<Control>,
    output: Output,
    lines: LineFormat,
    /// `Control::dropped` when the thread last warned about it.
    reported: u64,
    /// Reused for every batch: formatting allocates nothing once it has grown.
    buffer: Vec<u8>,
}

impl Writer {
    fn run(mut self) {
        let mut busy = false;
        loop {
            if !busy {
                // Parked without a timeout while off: nothing is queued then, and a reopen
                // or close unparks the thread.
                match self.output {
                    Output::Off => thread::park(),
                    _ => thread::park_timeout(FLUSH_EVERY),
                }
            }
            // Acquire: pairs with the Release store in `close`, after which nothing new is
            // expected; what is queued is still written below.
            let closing = self.control.closing.load(Ordering::Acquire);
            // Acquire: pairs with the Release store of the handle asking for it.
            if self.control.reopen.swap(false, Ordering::Acquire) {
                self.reopen();
            }
            let (taken, disconnected) = self.write_queued();
            self.report_dropped();
            if closing || disconnected {
                return;
            }
            // A full round means the queue may hold more: go again without waiting.
            busy = taken == CAPACITY;
        }
    }

    /// Reopens the file by its path (after logrotate moved it); on failure the old file is
    /// kept, as nginx does, so no line is lost.
    fn reopen(&mut self) {
        let Output::File { path, .. } = &self.output else {
            tracing::debug!("access log reopen asked, but it is not written to a file");
            return;
        };
        match Output::open(path) {
            Ok(reopened) => {
                tracing::info!(path = %path.display(), "access log reopened");
                self.output = reopened;
            }
            Err(error) => tracing::error!(
                path = %path.display(),
                %error,
                "cannot reopen the access log; still writing to the file open before"
            ),
        }
    }

    /// Formats and writes at most [`CAPACITY`] queued records; returns how many it took and
    /// whether every sender is gone.
    fn write_queued(&mut self) -> (usize, bool) {
        let mut taken = 0;
        let mut disconnected = false;
        while taken < CAPACITY {
            match self.queue.try_recv() {
                Ok(record) => {
                    taken += 1;
                    if matches!(self.output, Output::Off) {
                        continue;
                    }
                    self.lines.append(&record, &mut self.buffer);
                    if self.buffer.len() >= WRITE_AT {
                        self.flush();
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    disconnected = true;
                    break;
                }
            }
        }
        self.flush();
        (taken, disconnected)
    }

    /// Writes the buffer; a failed write (a full disk) loses its lines, with a warning.
    fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        if let Err(error) = self.output.write(&self.buffer) {
            let lines = self.buffer.iter().filter(|&&b| b == b'\n').count();
            tracing::warn!(%error, lines, "cannot write the access log; lines lost");
        }
        self.buffer.clear();
    }

    /// Warns once per round about records the queue had no room for.
    fn report_dropped(&mut self) {
        // Relaxed: a count; no other memory depends on it.
        let total = self.control.dropped.load(Ordering::Relaxed);
        let dropped = total - self.reported;
        if dropped > 0 {
            self.reported = total;
            tracing::warn!(
                dropped,
                total,
                "access log lines dropped: requests came faster than the log could be written"
            );
        }
    }
}
