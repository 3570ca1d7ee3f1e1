//! The local invocation journal: every record is appended to a file before
//! its request is answered, so that a record the database has not taken yet
//! (the database is down or slow, or the process is killed) is not lost.
//!
//! The journal is a directory of numbered segment files (`000000000042.jsonl`),
//! one [`Invocation`] as JSON per line. Requests append to the newest segment;
//! the [`writer`](super::writer) closes a segment each time it takes the
//! queued records, and deletes it once they are committed. A segment that
//! could not be committed stays on disk as backlog and is replayed, oldest
//! first, when the database answers again or when the next process starts.
//! Lines are written with one `write` to the page cache (no fsync): they
//! survive the process being killed, not the machine losing power; a line
//! torn by that is skipped when read.
//!
//! An exclusive `flock` on `lock` keeps a second process out of the
//! directory: two writers would delete each other's segments.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Invocation;

const SUFFIX: &str = ".jsonl";
const NUMBER_DIGITS: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot create the invocation journal directory {dir}: {source}")]
    Directory {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "another gateway process uses the journal directory {dir}: give each process its own \
         `journal_dir`"
    )]
    InUse { dir: PathBuf },
    #[error("invocation journal {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An open journal directory, held exclusively by this process; hand it to
/// [`InvocationLog::start`](super::InvocationLog::start).
pub struct Journal {
    dir: PathBuf,
    /// Holds the `flock` for as long as the journal lives.
    _lock: File,
    /// Segments left by an earlier process, oldest first.
    pub(super) backlog: VecDeque<PathBuf>,
    next_number: u64,
    /// Where appends go; taken by the writer at start.
    pub(super) current: Option<Segment>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.dir)
            .field("backlog", &self.backlog.len())
            .finish()
    }
}

impl Journal {
    /// Opens (creating) the journal directory `dir`: refuses it when another
    /// process holds it, finds the segments an earlier process left (to be
    /// replayed by the writer) and opens a fresh segment for appends.
    pub fn open(dir: &Path) -> Result<Journal, JournalError> {
        let directory_error = |source| JournalError::Directory {
            dir: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(directory_error)?;
        let lock_path = dir.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| JournalError::File {
                path: lock_path.clone(),
                source,
            })?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let source = std::io::Error::last_os_error();
            if source.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(JournalError::InUse {
                    dir: dir.to_owned(),
                });
            }
            return Err(JournalError::File {
                path: lock_path,
                source,
            });
        }

        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(directory_error)? {
            let entry = entry.map_err(directory_error)?;
            if let Some(number) = entry.file_name().to_str().and_then(segment_number) {
                found.push((number, entry.path()));
            }
        }
        found.sort();
        let next_number = found.last().map_or(1, |(n, _)| n + 1);
        let mut journal = Journal {
            dir: dir.to_owned(),
            _lock: lock,
            backlog: found.into_iter().map(|(_, path)| path).collect(),
            next_number,
            current: None,
        };
        journal.current = Some(
            journal
                .create_segment()
                .map_err(|source| JournalError::File {
                    path: dir.to_owned(),
                    source,
                })?,
        );
        if !journal.backlog.is_empty() {
            tracing::info!(dir = %dir.display(),
                "{} invocation journal segment(s) left by an earlier process: writing them to \
                 the database", journal.backlog.len());
        }
        Ok(journal)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the next segment, numbered after every one before it.
    pub(super) fn create_segment(&mut self) -> std::io::Result<Segment> {
        let number = self.next_number;
        let path = self.dir.join(segment_name(number));
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        self.next_number += 1;
        Ok(Segment {
            path,
            file,
            torn: false,
        })
    }
}

fn segment_name(number: u64) -> String {
    format!("{number:0NUMBER_DIGITS$}{SUFFIX}")
}

fn segment_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != NUMBER_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One segment file open for appending.
pub(super) struct Segment {
    pub(super) path: PathBuf,
    file: File,
    /// A failed write may have left part of a line: the next line starts on
    /// a line of its own so that only the torn one is lost when read.
    torn: bool,
}

impl Segment {
    /// Appends one encoded line (see [`encode`]) in one `write`.
    pub(super) fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let result = if self.torn {
            let mut fresh = Vec::with_capacity(line.len() + 1);
            fresh.push(b'\n');
            fresh.extend_from_slice(line);
            self.file.write_all(&fresh)
        } else {
            self.file.write_all(line)
        };
        self.torn = result.is_err();
        result
    }
}

#[cfg(test)]
impl Segment {
    /// `segment` writing to `file` instead (a read-only one fails like a full disk).
    pub(super) fn for_test(segment: Segment, file: File) -> Segment {
        Segment {
            path: segment.path,
            file,
            torn: false,
        }
    }
}

/// One journal line: the record as JSON and a newline.
pub(super) fn encode(invocation: &Invocation) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = Vec::with_capacity(
        512 + invocation.request.as_ref().map_or(0, String::len)
            + invocation.response.as_ref().map_or(0, String::len),
    );
    serde_json::to_writer(&mut line, invocation)?;
    line.push(b'\n');
    Ok(line)
}

/// Reads a closed segment back in chunks.
pub(super) struct SegmentReader {
    path: PathBuf,
    reader: BufReader<File>,
    line_number: u64,
    buffer: Vec<u8>,
}

impl SegmentReader {
    pub(super) fn open(path: &Path) -> std::io::Result<SegmentReader> {
        Ok(SegmentReader {
            path: path.to_owned(),
            reader: BufReader::with_capacity(256 * 1024, File::open(path)?),
            line_number: 0,
            buffer: Vec::new(),
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The next at most `max` records; empty at the end of the file. A line
    /// that does not parse (torn by a crash or a full disk) is logged and
    /// skipped.
    pub(super) fn next_chunk(&mut self, max: usize) -> std::io::Result<Vec<Invocation>> {
        let mut chunk = Vec::new();
        while chunk.len() < max {
            self.buffer.clear();
            if self.reader.read_until(b'\n', &mut self.buffer)? == 0 {
                break;
            }
            self.line_number += 1;
            let line = self.buffer.trim_ascii();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Invocation>(line) {
                Ok(invocation) => chunk.push(invocation),
                Err(e) => tracing::warn!(file = %self.path.display(), line = self.line_number,
                    "skipping an unreadable invocation journal line (torn by a crash?): {e}"),
            }
        }
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_by_number() {
        assert_eq!(segment_name(42), "000000000042.jsonl");
        assert_eq!(segment_number("000000000042.jsonl"), Some(42));
        assert_eq!(segment_number("42.jsonl"), None);
        assert_eq!(segment_number("lock"), None);
        assert_eq!(segment_number("00000000004x.jsonl"), None);
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = Journal::open(dir.path()).unwrap();
        let second = Journal::open(dir.path());
        match second {
            Err(e @ JournalError::InUse { .. }) => {
                let message = e.to_string();
                assert!(message.contains("another gateway process"), "{message}");
                assert!(
                    message.contains(&dir.path().display().to_string()),
                    "{message}"
                );
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        drop(first);
        let again = Journal::open(dir.path()).unwrap();
        // The first journal's (empty) segment is found as backlog; the new one comes after it.
        assert_eq!(again.backlog.len(), 1);
        let current = again.current.as_ref().unwrap();
        assert!(current.path.ends_with("000000000002.jsonl"));
    }

    #[test]
    fn a_torn_line_is_skipped_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(dir.path()).unwrap();
        let mut segment = journal.current.take().unwrap();
        let record = |n: i64| Invocation {
            project_id: Some("p".into()),
            status: crate::store::InvocationStatus::Success,
            http_status: 200,
            duration_ms: 1,
            request: Some("{\"a\":\"line\\nbreak\"}".into()),
            ..Invocation::begun(uuid::Uuid::now_v7(), n)
        };
        let records: Vec<_> = (0..5).map(record).collect();
        segment.append(&encode(&records[0]).unwrap()).unwrap();
        segment.append(&encode(&records[1]).unwrap()).unwrap();
        let torn = encode(&records[2]).unwrap();
        segment.append(&torn[..torn.len() / 2]).unwrap();
        // As after a failed write: the next line must not be glued to the torn one.
        segment.torn = true;
        segment.append(&encode(&records[3]).unwrap()).unwrap();
        let last = encode(&records[4]).unwrap();
        segment.append(&last[..last.len() - 10]).unwrap();

        let mut reader = SegmentReader::open(&segment.path).unwrap();
        let first = reader.next_chunk(2).unwrap();
        let rest = reader.next_chunk(10).unwrap();
        assert_eq!(first, records[..2]);
        assert_eq!(rest, [records[3].clone()]);
        assert!(reader.next_chunk(10).unwrap().is_empty());
    }
}
