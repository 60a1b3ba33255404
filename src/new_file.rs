//! Writing a file that must not exist yet, with its permissions set from the
//! start: the CA's key and the signing key are never readable by others,
//! not even for the moment between creating and `chmod`-ing them.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

/// What failed while writing a new file.
#[derive(Debug)]
pub enum NewFileError {
    /// It could not be created (it exists, even as a dangling link, or the
    /// directory is missing or read-only).
    Create(std::io::Error),
    /// Its contents could not be written or synced.
    Write(std::io::Error),
}

impl NewFileError {
    /// The action and the OS error, for the callers' own error types.
    pub fn parts(self) -> (&'static str, std::io::Error) {
        match self {
            NewFileError::Create(e) => ("create", e),
            NewFileError::Write(e) => ("write", e),
        }
    }
}

/// Creates `path` (failing if anything is there) with `mode` on Unix, writes
/// `contents` and syncs them to disk.
///
/// # Errors
///
/// [`NewFileError`].
pub fn create_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), NewFileError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(NewFileError::Create)?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(NewFileError::Write)
}
