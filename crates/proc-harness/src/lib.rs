//! Broker and name server processes for tests and benchmarks: start a
//! `broker` or `namesrv` binary on loopback, wait until it listens, stop it.
//!
//! `cargo xtask e2e`, `cargo xtask bench` and the end-to-end suite (`tests/`)
//! all start, watch and stop their processes through this crate:
//!
//! - [`Launch`] describes one process: its binary, arguments, `--set
//!   key=value` settings, the log file its stdout and stderr go to, and the
//!   inherited environment variables it must not see. [`Launch::spawn`]
//!   starts it.
//! - [`Proc`] is the running process. [`Proc::wait_listening`] waits until
//!   an address accepts TCP connections and fails as soon as the process
//!   exits, when the time since its start runs out, or (with
//!   [`Proc::wait_listening_unless`]) when an interrupt flag is raised.
//!   [`Proc::print_tail`] prints the end of its log. Dropping a [`Proc`]
//!   kills the process; when the thread is panicking and
//!   [`Launch::tail_on_panic`] asked for it, the log's tail is printed too.
//! - [`free_port`], [`loopback`] and [`target_dir`]: a free loopback port,
//!   its address, and where cargo puts the binaries.
//!
//! Standard library only: `xtask` depends on this crate and must stay quick
//! to build.

use std::{
    collections::{hash_map::RandomState, BTreeSet},
    env,
    error::Error,
    ffi::OsStr,
    fmt,
    fs::{self, File},
    hash::{BuildHasher, Hasher},
    io,
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
    thread,
    time::{Duration, Instant},
};

/// How long one connection attempt may take while waiting for a port.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);
/// Pause between connection attempts while waiting for a port.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A process to start: binary, arguments, settings and log file.
///
/// Built in steps, then [`Launch::spawn`]ed. Its stdin is empty; stdout and
/// stderr both go to the log file, which is created afresh unless
/// [`Launch::append_log`] is asked for.
pub struct Launch {
    name: String,
    command: Command,
    log: PathBuf,
    append: bool,
    tail_on_panic: Option<usize>,
}

impl Launch {
    /// A process called `name` (in messages) running `program`, logging to
    /// `log`.
    ///
    /// Errors it returns from `main` carry no backtrace
    /// (`RUST_LIB_BACKTRACE=0`), so that the end of its log shows the error
    /// itself; panics keep theirs when `RUST_BACKTRACE` asks for them.
    pub fn new(
        name: impl Into<String>,
        program: impl AsRef<OsStr>,
        log: impl Into<PathBuf>,
    ) -> Self {
        let mut command = Command::new(program);
        command.env("RUST_LIB_BACKTRACE", "0");
        Self {
            name: name.into(),
            command,
            log: log.into(),
            append: false,
            tail_on_panic: None,
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Adds one broker setting as `--set key=value`.
    #[must_use]
    pub fn set(mut self, setting: impl AsRef<OsStr>) -> Self {
        self.command.arg("--set").arg(setting);
        self
    }

    /// Adds broker settings, each as `--set key=value`, in order.
    #[must_use]
    pub fn settings<I, S>(mut self, settings: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for setting in settings {
            self = self.set(setting);
        }
        self
    }

    /// Sets one environment variable of the child.
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Removes every variable of this process's environment whose name
    /// starts with `prefix` from the child's (a broker refuses `SLUICE_*`
    /// keys it does not know).
    #[must_use]
    pub fn env_remove_prefixed(mut self, prefix: &str) -> Self {
        for (name, _) in env::vars_os() {
            if name.to_string_lossy().starts_with(prefix) {
                self.command.env_remove(name);
            }
        }
        self
    }

    /// Appends to the log file instead of replacing it (a process restarted
    /// on the same directory keeps one log).
    #[must_use]
    pub fn append_log(mut self) -> Self {
        self.append = true;
        self
    }

    /// When the [`Proc`] is dropped while its thread panics (a failed
    /// assertion of a test), prints the last `lines` lines of its log.
    #[must_use]
    pub fn tail_on_panic(mut self, lines: usize) -> Self {
        self.tail_on_panic = Some(lines);
        self
    }

    /// The name given to [`Launch::new`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts the process, creating the log file (and its directory).
    ///
    /// # Errors
    /// When the log file cannot be created or the binary not started.
    pub fn spawn(mut self) -> io::Result<Proc> {
        let log = self.log;
        if let Some(dir) = log.parent() {
            fs::create_dir_all(dir).map_err(|e| context(e, format!("create {}", dir.display())))?;
        }
        let file = if self.append {
            File::options().create(true).append(true).open(&log)
        } else {
            File::create(&log)
        }
        .map_err(|e| context(e, format!("create {}", log.display())))?;
        let err = file
            .try_clone()
            .map_err(|e| context(e, "duplicate the log file handle".to_owned()))?;
        self.command.stdin(Stdio::null()).stdout(file).stderr(err);
        let child = self.command.spawn().map_err(|e| {
            let program = self.command.get_program().to_string_lossy().into_owned();
            context(e, format!("start {} ({program})", self.name))
        })?;
        Ok(Proc {
            name: self.name,
            child,
            log,
            started: Instant::now(),
            tail_on_panic: self.tail_on_panic,
        })
    }
}

impl fmt::Debug for Launch {
    /// The command line, as [`Command`] shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.command)
    }
}

/// A started process; killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
    started: Instant,
    tail_on_panic: Option<usize>,
}

impl Proc {
    /// The name it was launched with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status if it has exited, without waiting.
    ///
    /// # Errors
    /// When the process cannot be polled.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Whether the process is still running (a crash shows here).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit by itself.
    ///
    /// # Errors
    /// When the process cannot be waited for.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait()
    }

    /// Kills the process (SIGKILL) and waits until it is gone. Killing a
    /// process that already exited succeeds.
    ///
    /// # Errors
    /// When the signal cannot be sent or the process not reaped.
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Waits until `addr` (`ip:port`) accepts TCP connections, at most until
    /// `limit` after the process started.
    ///
    /// # Errors
    /// When the process exits first, the time runs out, or `addr` is not an
    /// address.
    pub fn wait_listening(&mut self, addr: &str, limit: Duration) -> Result<(), WaitError> {
        self.wait_listening_unless(addr, limit, &AtomicBool::new(false))
    }

    /// Waits as [`Proc::wait_listening`] does, and also gives up once
    /// `interrupted` is set (by a signal handler, for example).
    ///
    /// # Errors
    /// As [`Proc::wait_listening`], and [`WaitError::Interrupted`].
    pub fn wait_listening_unless(
        &mut self,
        addr: &str,
        limit: Duration,
        interrupted: &AtomicBool,
    ) -> Result<(), WaitError> {
        let sock: SocketAddr = addr.parse().map_err(|e| WaitError::Io {
            name: self.name.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("address {addr:?}: {e}"),
            ),
        })?;
        let deadline = self.started + limit;
        loop {
            if TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT).is_ok() {
                return Ok(());
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return Err(WaitError::Exited {
                        name: self.name.clone(),
                        addr: addr.to_owned(),
                        status,
                        log: self.log.clone(),
                    })
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(WaitError::Io {
                        name: self.name.clone(),
                        source,
                    })
                }
            }
            if Instant::now() >= deadline {
                return Err(WaitError::TimedOut {
                    name: self.name.clone(),
                    addr: addr.to_owned(),
                    limit,
                    log: self.log.clone(),
                });
            }
            if interrupted.load(Ordering::Relaxed) {
                return Err(WaitError::Interrupted {
                    name: self.name.clone(),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The last `lines` lines of the log (invalid UTF-8 replaced).
    ///
    /// # Errors
    /// When the log cannot be read.
    pub fn log_tail(&self, lines: usize) -> io::Result<Vec<String>> {
        let bytes = fs::read(&self.log)?;
        let text = String::from_utf8_lossy(&bytes);
        let all: Vec<&str> = text.lines().collect();
        let from = all.len().saturating_sub(lines);
        Ok(all[from..].iter().map(|l| (*l).to_owned()).collect())
    }

    /// Prints the last `lines` lines of the log to stderr under a header
    /// naming the file, or why it cannot be read.
    pub fn print_tail(&self, lines: usize) {
        match self.log_tail(lines) {
            Ok(tail) => {
                eprintln!(
                    "----- last {} lines of {} -----",
                    tail.len(),
                    self.log.display()
                );
                for line in &tail {
                    eprintln!("{line}");
                }
            }
            Err(e) => eprintln!("cannot read {}: {e}", self.log.display()),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Errors mean the process already exited; nothing else to do.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(lines) = self.tail_on_panic {
            if thread::panicking() {
                self.print_tail(lines);
            }
        }
    }
}

/// Why [`Proc::wait_listening`] gave up.
#[derive(Debug)]
#[non_exhaustive]
pub enum WaitError {
    /// The process exited before the address accepted connections.
    Exited {
        /// The process's name.
        name: String,
        /// The address waited for.
        addr: String,
        /// How it exited.
        status: ExitStatus,
        /// Its log file.
        log: PathBuf,
    },
    /// The address did not accept connections within the limit.
    TimedOut {
        /// The process's name.
        name: String,
        /// The address waited for.
        addr: String,
        /// The limit, counted from the process's start.
        limit: Duration,
        /// Its log file.
        log: PathBuf,
    },
    /// The interrupt flag was raised.
    Interrupted {
        /// The process's name.
        name: String,
    },
    /// The process could not be polled, or the address was not one.
    Io {
        /// The process's name.
        name: String,
        /// What failed.
        source: io::Error,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited {
                name,
                addr,
                status,
                log,
            } => write!(
                f,
                "{name} exited with {status} before listening on {addr} (log {})",
                log.display()
            ),
            Self::TimedOut {
                name,
                addr,
                limit,
                log,
            } => write!(
                f,
                "{name} not listening on {addr} within {limit:?} of its start (log {})",
                log.display()
            ),
            Self::Interrupted { name } => write!(f, "interrupted while waiting for {name}"),
            Self::Io { name, source } => write!(f, "waiting for {name}: {source}"),
        }
    }
}

impl Error for WaitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Lowest port [`free_port`] hands out.
const FIRST_PORT: u16 = 20_000;
/// The ephemeral range Linux uses when `/proc` cannot be read.
const DEFAULT_EPHEMERAL: (u16, u16) = (32_768, 60_999);

/// A loopback port that was free a moment ago (bound once, then released),
/// outside the kernel's ephemeral range and never handed out before by this
/// process.
///
/// A port from the ephemeral range (what binding port 0 gives) can be taken
/// by any outgoing connection between this call and the server's own bind,
/// including the connection attempts that wait for that server; one such
/// collision stops a broker with "Address already in use". Ports below the
/// range are only ever taken by servers that bind them by number.
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> io::Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let (low, high) = ephemeral_range().unwrap_or(DEFAULT_EPHEMERAL);
    let candidates: Vec<u16> = if low > FIRST_PORT {
        (FIRST_PORT..low).collect()
    } else {
        (high.saturating_add(1)..=u16::MAX).collect()
    };
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    if !candidates.is_empty() {
        let start = usize::try_from(RandomState::new().build_hasher().finish() % 65_536)
            .unwrap_or(0)
            % candidates.len();
        let ordered = candidates[start..].iter().chain(&candidates[..start]);
        for &port in ordered {
            if !handed.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| context(e, "bind a free loopback port".to_owned()))?;
    let port = listener.local_addr()?.port();
    handed.insert(port);
    Ok(port)
}

/// The kernel's ephemeral port range, `(first, last)`, when it can be read.
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut parts = text.split_whitespace().map(str::parse::<u16>);
    match (parts.next(), parts.next()) {
        (Some(Ok(low)), Some(Ok(high))) if low <= high => Some((low, high)),
        _ => None,
    }
}

/// The loopback address of `port`: `127.0.0.1:port`.
pub fn loopback(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// The target directory `cargo build` uses for the workspace at `root`:
/// `CARGO_TARGET_DIR` (relative to `root` if relative) or `<root>/target`.
pub fn target_dir(root: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(d) => root.join(d),
        None => root.join("target"),
    }
}

/// `e` with `what` in front of its message, of the same kind.
fn context(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory of one test, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Self {
            let dir = env::temp_dir().join(format!("proc-harness-{test}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn free_ports_are_outside_the_ephemeral_range_distinct_and_bindable(
    ) -> Result<(), Box<dyn Error>> {
        let (low, high) = ephemeral_range().unwrap_or(DEFAULT_EPHEMERAL);
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect::<Result<_, _>>()?;
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            ports.len(),
            "a port handed out twice: {ports:?}"
        );
        for port in ports {
            assert!(
                !(low..=high).contains(&port),
                "{port} is in the ephemeral range {low}-{high}"
            );
            TcpListener::bind(("127.0.0.1", port))?;
        }
        Ok(())
    }

    #[test]
    fn a_launched_process_sees_no_library_backtrace_request() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("backtrace");
        let mut p = sh("env", &dir, "echo \"[$RUST_LIB_BACKTRACE]\"").spawn()?;
        p.wait()?;
        assert_eq!(p.log_tail(1)?, ["[0]"]);
        Ok(())
    }

    fn sh(name: &str, dir: &Scratch, script: &str) -> Launch {
        Launch::new(name, "/bin/sh", dir.0.join(format!("{name}.log"))).args(["-c", script])
    }

    #[test]
    fn stdout_and_stderr_go_to_the_log_and_its_tail_is_the_last_lines() -> Result<(), Box<dyn Error>>
    {
        let dir = Scratch::new("log");
        let mut p = sh("talker", &dir, "echo one; echo two >&2; echo three").spawn()?;
        assert!(p.wait()?.success());
        assert_eq!(p.log_tail(2)?, ["two", "three"]);
        assert_eq!(p.log_tail(10)?, ["one", "two", "three"]);
        // A restarted process may append to the same log.
        let mut again = sh("talker", &dir, "echo four").append_log().spawn()?;
        again.wait()?;
        assert_eq!(again.log_tail(2)?, ["three", "four"]);
        let mut fresh = sh("talker", &dir, "echo five").spawn()?;
        fresh.wait()?;
        assert_eq!(fresh.log_tail(10)?, ["five"]);
        Ok(())
    }

    #[test]
    fn settings_become_set_arguments_in_order() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("settings");
        let launch = sh("args", &dir, r#"for a in "$@"; do echo "$a"; done"#)
            .arg("sh")
            .set("a=1")
            .settings(["b=2", "c=3"]);
        assert!(format!("{launch:?}").contains(r#""--set" "a=1""#));
        let mut p = launch.spawn()?;
        p.wait()?;
        assert_eq!(
            p.log_tail(10)?,
            ["--set", "a=1", "--set", "b=2", "--set", "c=3"]
        );
        Ok(())
    }

    #[test]
    fn waiting_ends_when_the_port_accepts_connections() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("listen");
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = loopback(listener.local_addr()?.port());
        let mut p = sh("sleeper", &dir, "exec sleep 60").spawn()?;
        p.wait_listening(&addr, Duration::from_secs(60))?;
        assert!(p.is_running());
        p.kill()?;
        assert!(!p.is_running());
        // Killing again, or dropping, is harmless.
        p.kill()?;
        Ok(())
    }

    #[test]
    fn a_process_that_exits_ends_the_wait_at_once() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("exit");
        let mut p = sh("quitter", &dir, "echo bye; exit 3").spawn()?;
        // Port 0 refuses every connection, so only the exit ends the wait.
        match p.wait_listening("127.0.0.1:0", Duration::from_secs(60)) {
            Err(WaitError::Exited { status, name, .. }) => {
                assert_eq!(status.code(), Some(3));
                assert_eq!(name, "quitter");
            }
            other => panic!("expected Exited, got {other:?}"),
        }
        assert_eq!(p.log_tail(1)?, ["bye"]);
        Ok(())
    }

    #[test]
    fn the_wait_gives_up_after_the_limit_or_when_interrupted() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("limit");
        let mut p = sh("mute", &dir, "exec sleep 60").spawn()?;
        let limit = Duration::from_millis(300);
        match p.wait_listening("127.0.0.1:0", limit) {
            Err(e @ WaitError::TimedOut { .. }) => {
                assert!(e.to_string().contains("within 300ms"), "{e}");
            }
            other => panic!("expected TimedOut, got {other:?}"),
        }
        assert!(p.is_running(), "giving up does not kill the process");
        let mut q = sh("mute2", &dir, "exec sleep 60").spawn()?;
        let stop = AtomicBool::new(true);
        match q.wait_listening_unless("127.0.0.1:0", Duration::from_secs(600), &stop) {
            Err(WaitError::Interrupted { name }) => assert_eq!(name, "mute2"),
            other => panic!("expected Interrupted, got {other:?}"),
        }
        assert!(matches!(
            q.wait_listening("not an address", limit),
            Err(WaitError::Io { .. })
        ));
        Ok(())
    }

    #[test]
    fn dropping_kills_the_process() -> Result<(), Box<dyn Error>> {
        let dir = Scratch::new("drop");
        let p = sh("doomed", &dir, "exec sleep 60").spawn()?;
        let pid = p.id();
        drop(p);
        // Reaped by the drop: no such process any more.
        let status = Command::new("/bin/sh")
            .args(["-c", &format!("kill -0 {pid} 2>/dev/null")])
            .status()?;
        assert!(!status.success(), "process {pid} still exists");
        Ok(())
    }

    #[test]
    fn a_free_port_can_be_bound_on_loopback() -> Result<(), Box<dyn Error>> {
        let port = free_port()?;
        assert_ne!(port, 0);
        assert_eq!(loopback(port), format!("127.0.0.1:{port}"));
        Ok(())
    }
}
