//! The process's standard input and output as asynchronous streams for an MCP session.
//!
//! Tokio's `stdin()` and `stdout()` read and write on a blocking thread: every message read
//! wakes that thread and then a runtime worker, every answer written hands its bytes to the
//! thread and waits for it. When a host runs the server as its child, both are almost always
//! pipes (`subprocess`, `tokio::process`) or Unix sockets (Node.js's `child_process`), which can
//! be read and written without blocking, on the runtime's own event loop. [`streams`] does that
//! when it is safe, and falls back to Tokio's blocking streams otherwise:
//!
//! | standard input and output | streams |
//! | --- | --- |
//! | each a pipe or a Unix stream socket, and neither the same file as standard error | non-blocking, on the event loop; the descriptions get their blocking mode back when the streams are dropped |
//! | a terminal, a file, `/dev/null`, another kind of socket, or shared with standard error | Tokio's `stdin()` and `stdout()` |
//!
//! Standard error is left blocking: a write to it that found a full pipe would fail instead of
//! waiting (and `eprintln!` panics on a failed write), so streams that share a file with it
//! stay blocking too.

use tokio::io::{AsyncRead, AsyncWrite};

/// Standard input, readable by the runtime.
pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
/// Standard output, writable by the runtime.
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// Standard input and output for one MCP session (see the module documentation). Needs a Tokio
/// runtime with I/O enabled.
pub(crate) fn streams() -> (Input, Output) {
    #[cfg(unix)]
    if let Some((input, output)) = unix::nonblocking() {
        return (input, output);
    }
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

#[cfg(unix)]
mod unix {
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use rustix::fs::{FileType, OFlags};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::unix::pipe;

    use super::{Input, Output};

    /// What a stream is, for the choice between non-blocking and Tokio's streams.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Kind {
        Pipe,
        UnixSocket,
        /// A terminal, a file, a device, another kind of socket.
        Other,
    }

    /// A file description's flags as they were, and a descriptor to set them back through.
    pub(super) struct Flags {
        fd: OwnedFd,
        flags: OFlags,
    }

    impl Flags {
        fn of(fd: BorrowedFd<'_>) -> Option<Flags> {
            let flags = rustix::fs::fcntl_getfl(fd).ok()?;
            Some(Flags {
                fd: fd.try_clone_to_owned().ok()?,
                flags,
            })
        }

        pub(super) fn restore(self) {
            let _ = rustix::fs::fcntl_setfl(&self.fd, self.flags);
        }
    }

    /// The kind of the file `fd` refers to.
    pub(super) fn kind(fd: BorrowedFd<'_>) -> Kind {
        let Ok(stat) = rustix::fs::fstat(fd) else {
            return Kind::Other;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Fifo => Kind::Pipe,
            // A Unix socket: its local address reads as one (a TCP or UDP socket's does not).
            FileType::Socket => {
                let unix = fd
                    .try_clone_to_owned()
                    .is_ok_and(|dup| UnixStream::from(dup).local_addr().is_ok());
                if unix { Kind::UnixSocket } else { Kind::Other }
            }
            _ => Kind::Other,
        }
    }

    /// The file `fd` refers to, as (device, inode).
    fn file(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
        let stat = rustix::fs::fstat(fd).ok()?;
        #[allow(clippy::useless_conversion)] // the field types differ between targets
        Some((u64::from(stat.st_dev), u64::from(stat.st_ino)))
    }

    /// Whether standard input and output (`input`, `output`) may be made non-blocking: each a
    /// pipe or a Unix socket, and neither the same file as standard error (`error`).
    pub(super) fn suitable(
        input: BorrowedFd<'_>,
        output: BorrowedFd<'_>,
        error: BorrowedFd<'_>,
    ) -> bool {
        let streamable = |fd| kind(fd) != Kind::Other;
        if !streamable(input) || !streamable(output) {
            return false;
        }
        let (Some(i), Some(o)) = (file(input), file(output)) else {
            return false;
        };
        file(error).is_none_or(|e| e != i && e != o)
    }

    /// Standard input and output, non-blocking on the runtime's event loop, when
    /// [`suitable`].
    pub(super) fn nonblocking() -> Option<(Input, Output)> {
        let (input, output, error) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        if !suitable(input.as_fd(), output.as_fd(), error.as_fd()) {
            return None;
        }
        let input = reader(input.as_fd())?;
        let output = writer(output.as_fd())?;
        Some((input, output))
    }

    /// `fd` (a pipe or a Unix socket) as a non-blocking reader.
    pub(super) fn reader(fd: BorrowedFd<'_>) -> Option<Input> {
        Some(Box::new(open(fd, pipe::Receiver::from_owned_fd)?))
    }

    /// `fd` (a pipe or a Unix socket) as a non-blocking writer.
    pub(super) fn writer(fd: BorrowedFd<'_>) -> Option<Output> {
        Some(Box::new(open(fd, pipe::Sender::from_owned_fd)?))
    }

    /// `fd` as a non-blocking stream: a pipe's end made by `pipe`, or a Unix socket.
    fn open<P>(
        fd: BorrowedFd<'_>,
        pipe: fn(OwnedFd) -> std::io::Result<P>,
    ) -> Option<Restoring<P>> {
        let restore = Flags::of(fd)?;
        let dup = fd.try_clone_to_owned().ok()?;
        let end = match kind(fd) {
            Kind::Pipe => End::Pipe(pipe(dup).ok()?),
            Kind::UnixSocket => {
                let stream = UnixStream::from(dup);
                stream.set_nonblocking(true).ok()?;
                End::Socket(tokio::net::UnixStream::from_std(stream).ok()?)
            }
            Kind::Other => return None,
        };
        Some(Restoring {
            end,
            restore: Some(restore),
        })
    }

    /// One end of standard input or output.
    enum End<P> {
        Pipe(P),
        Socket(tokio::net::UnixStream),
    }

    /// A stream that gives its file description its flags back when dropped.
    pub(super) struct Restoring<P> {
        end: End<P>,
        restore: Option<Flags>,
    }

    impl<P> Drop for Restoring<P> {
        fn drop(&mut self) {
            if let Some(flags) = self.restore.take() {
                flags.restore();
            }
        }
    }

    impl<P: AsyncRead + Unpin> AsyncRead for Restoring<P> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            match &mut self.end {
                End::Pipe(p) => Pin::new(p).poll_read(cx, buf),
                End::Socket(s) => Pin::new(s).poll_read(cx, buf),
            }
        }
    }

    impl<P: AsyncWrite + Unpin> AsyncWrite for Restoring<P> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            match &mut self.end {
                End::Pipe(p) => Pin::new(p).poll_write(cx, buf),
                End::Socket(s) => Pin::new(s).poll_write(cx, buf),
            }
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            match &mut self.end {
                End::Pipe(p) => Pin::new(p).poll_flush(cx),
                End::Socket(s) => Pin::new(s).poll_flush(cx),
            }
        }

        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
            match &mut self.end {
                End::Pipe(p) => Pin::new(p).poll_shutdown(cx),
                End::Socket(s) => Pin::new(s).poll_shutdown(cx),
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::unix::{Kind, kind, suitable};

    fn pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
        std::io::pipe().expect("pipe")
    }

    #[test]
    fn pipes_and_unix_sockets_are_told_from_other_files() {
        let (read, write) = pipe();
        assert_eq!(kind(read.as_fd()), Kind::Pipe);
        assert_eq!(kind(write.as_fd()), Kind::Pipe);
        let (a, _b) = UnixStream::pair().expect("socket pair");
        assert_eq!(kind(a.as_fd()), Kind::UnixSocket);
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        assert_eq!(kind(tcp.as_fd()), Kind::Other);
        let file = std::fs::File::open("/dev/null").expect("/dev/null");
        assert_eq!(kind(file.as_fd()), Kind::Other);
    }

    #[test]
    fn streams_shared_with_standard_error_stay_blocking() {
        let (input, _) = pipe();
        let (_, output) = pipe();
        let (_, error) = pipe();
        assert!(suitable(input.as_fd(), output.as_fd(), error.as_fd()));
        // Standard error writes into the output's pipe (`2>&1`).
        assert!(!suitable(input.as_fd(), output.as_fd(), output.as_fd()));
        // One socket for input, output and error.
        let (socket, _peer) = UnixStream::pair().expect("socket pair");
        assert!(suitable(socket.as_fd(), socket.as_fd(), error.as_fd()));
        assert!(!suitable(socket.as_fd(), socket.as_fd(), socket.as_fd()));
        // A file as output.
        let file = std::fs::File::open("/dev/null").expect("/dev/null");
        assert!(!suitable(input.as_fd(), file.as_fd(), error.as_fd()));
    }

    #[tokio::test]
    async fn a_pipe_is_read_and_written_without_blocking_and_its_mode_restored() {
        let (read, write) = pipe();
        let blocking = rustix::fs::fcntl_getfl(&read).expect("flags");
        assert!(!blocking.contains(rustix::fs::OFlags::NONBLOCK));
        let mut input = super::unix::reader(read.as_fd()).expect("a pipe reader");
        let mut output = super::unix::writer(write.as_fd()).expect("a pipe writer");
        assert!(
            rustix::fs::fcntl_getfl(&read)
                .expect("flags")
                .contains(rustix::fs::OFlags::NONBLOCK)
        );
        output
            .write_all(b"{\"jsonrpc\":\"2.0\"}\n")
            .await
            .expect("write");
        output.flush().await.expect("flush");
        let mut line = [0u8; 18];
        input.read_exact(&mut line).await.expect("read");
        assert_eq!(&line, b"{\"jsonrpc\":\"2.0\"}\n");
        drop((input, output));
        assert_eq!(rustix::fs::fcntl_getfl(&read).expect("flags"), blocking);
        assert!(
            !rustix::fs::fcntl_getfl(&write)
                .expect("flags")
                .contains(rustix::fs::OFlags::NONBLOCK)
        );
    }
}
