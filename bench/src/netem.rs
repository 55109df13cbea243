//! An emulated network link for benchmarks: two network namespaces joined by a veth pair with
//! `tc netem` (one-way delay + rate) on both ends, created and torn down by the benchmark itself.
//!
//! Linux only, needs root, `ip`/`tc` (iproute2) and, for the delay, the `sch_netem` qdisc.
//! Kernels without `sch_netem` (e.g. some micro-VMs) get a rate-only link with `tbf` instead,
//! and the benchmark adds the delay with a user-space delay line ([`run_delay_relay`]);
//! [`NetemLink::shaping`] says which one is in place. Each link's names contain the process id,
//! so concurrent runs do not collide; the addresses (`10.77.0.1/30`, `10.77.0.2/30`) exist only
//! inside the two namespaces, so no other traffic crosses the link.
//!
//! Teardown: [`NetemLink`]'s `Drop` deletes both namespaces (which removes the veth pair and its
//! qdiscs). A detached janitor process (`setsid`) waits for the benchmark process to exit, stops
//! what still runs inside the namespaces and deletes them too, so a Ctrl-C or a kill leaves
//! nothing behind either.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How the link is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Shaping {
    /// `netem delay <one-way> rate <bandwidth>` on both ends.
    NetemDelayRate,
    /// `tbf rate <bandwidth>` on both ends: the kernel has no `sch_netem`, so the delay is not
    /// emulated (only the bandwidth term of the model is comparable).
    TbfRateOnly,
    /// `tbf rate <bandwidth>` on both ends plus a user-space delay line ([`run_delay_relay`])
    /// inside party 1's namespace that holds every chunk for the one-way delay in each
    /// direction: the fallback for kernels without `sch_netem` when a delay is wanted.
    TbfRateUserDelay,
}

/// Why building or running the emulated link failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum NetemError {
    /// A missing prerequisite (not root, no iproute2, not Linux).
    Unavailable {
        /// Why.
        reason: String,
    },
    /// A command could not be started.
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A command exited with a failure status.
    Command {
        /// The command line.
        command: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// A socket call of the delay line failed.
    Relay {
        /// The step (`"bind"`, `"accept"`, `"connect"`, `"read"`, `"write"`, ...).
        step: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// No connection reached the delay line within the idle timeout.
    RelayIdle {
        /// The timeout.
        waited: Duration,
    },
    /// A delay-line thread stopped abnormally.
    RelayThread,
}

impl std::fmt::Display for NetemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetemError::Unavailable { reason } => write!(f, "{reason}"),
            NetemError::Spawn { command, source } => write!(f, "`{command}`: {source}"),
            NetemError::Command { command, stderr } => write!(f, "`{command}` failed: {stderr}"),
            NetemError::Relay { step, source } => write!(f, "delay line {step}: {source}"),
            NetemError::RelayIdle { waited } => {
                write!(f, "delay line: no connection within {waited:?}")
            }
            NetemError::RelayThread => write!(f, "a delay-line thread stopped abnormally"),
        }
    }
}

impl std::error::Error for NetemError {}

fn relay(step: &'static str) -> impl FnOnce(std::io::Error) -> NetemError {
    move |source| NetemError::Relay { step, source }
}

/// A live emulated link. Dropping it tears it down.
#[derive(Debug)]
pub struct NetemLink {
    ns: [String; 2],
    addrs: [String; 2],
    shaping: Shaping,
}

fn run(args: &[&str]) -> Result<String, NetemError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetemError::Spawn {
            command: args.join(" "),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetemError::Command {
            command: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Why an emulated link cannot be built here, or `None` if the prerequisites are met (root,
/// `ip`, `tc`, network namespaces). Missing `sch_netem` is not a reason: see [`Shaping`].
pub fn unavailable_reason() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("network namespaces need Linux".into());
    }
    if !is_root() {
        return Some("creating network namespaces and qdiscs needs root (effective uid 0)".into());
    }
    for tool in ["ip", "tc"] {
        if run(&[tool, "-V"]).is_err() {
            return Some(format!(
                "`{tool}` not found (install iproute2, e.g. `apt-get install iproute2`)"
            ));
        }
    }
    None
}

impl NetemLink {
    /// Builds the link: namespaces `veil<pid>n0`/`veil<pid>n1`, veth `vl<pid>a`/`vl<pid>b`,
    /// addresses `10.77.0.1/30` and `10.77.0.2/30`, and on both ends `netem delay <one_way>
    /// rate <bits_per_s>` (or `tbf rate <bits_per_s>` when the kernel lacks `sch_netem`).
    pub fn new(one_way: Duration, bits_per_s: f64) -> Result<Self, NetemError> {
        if let Some(reason) = unavailable_reason() {
            return Err(NetemError::Unavailable { reason });
        }
        let pid = std::process::id();
        let ns = [format!("veil{pid}n0"), format!("veil{pid}n1")];
        let dev = [format!("vl{pid}a"), format!("vl{pid}b")];
        let addrs = ["10.77.0.1".to_string(), "10.77.0.2".to_string()];
        run(&["ip", "netns", "add", &ns[0]])?;
        let mut link = NetemLink {
            ns: [ns[0].clone(), String::new()],
            addrs: addrs.clone(),
            shaping: Shaping::NetemDelayRate,
        };
        run(&["ip", "netns", "add", &ns[1]])?;
        link.ns[1] = ns[1].clone();
        spawn_janitor(pid, &ns);
        run(&[
            "ip", "link", "add", &dev[0], "type", "veth", "peer", "name", &dev[1],
        ])?;
        for i in 0..2 {
            // Moving the end into its namespace: deleting the namespace later removes it.
            if let Err(e) = run(&["ip", "link", "set", &dev[i], "netns", &ns[i]]) {
                let _ = run(&["ip", "link", "del", &dev[0]]);
                return Err(e);
            }
        }
        let rate = format!("{}bit", bits_per_s.round() as u64);
        let delay = format!("{}us", one_way.as_micros());
        for i in 0..2 {
            let cidr = format!("{}/30", addrs[i]);
            run(&["ip", "-n", &ns[i], "addr", "add", &cidr, "dev", &dev[i]])?;
            run(&["ip", "-n", &ns[i], "link", "set", "lo", "up"])?;
            run(&["ip", "-n", &ns[i], "link", "set", &dev[i], "up"])?;
            // A queue long enough that the rate limiter delays packets instead of dropping them.
            let netem = run(&[
                "ip", "netns", "exec", &ns[i], "tc", "qdisc", "add", "dev", &dev[i], "root",
                "netem", "delay", &delay, "rate", &rate, "limit", "100000",
            ]);
            match netem {
                Ok(_) => {}
                Err(NetemError::Command { stderr, .. }) if stderr.contains("unknown") => {
                    link.shaping = Shaping::TbfRateOnly;
                    // Bucket of 10 ms at the rate (≥ 64 KB so GSO segments pass), 1 s queue.
                    let burst = format!("{}", ((bits_per_s / 8.0 / 100.0) as u64).max(1 << 16));
                    run(&[
                        "ip", "netns", "exec", &ns[i], "tc", "qdisc", "add", "dev", &dev[i],
                        "root", "tbf", "rate", &rate, "burst", &burst, "latency", "1s",
                    ])?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(link)
    }

    /// The namespace of party `i` (`0` or `1`).
    pub fn namespace(&self, i: usize) -> &str {
        &self.ns[i]
    }

    /// The address of party `i` on the link.
    pub fn addr(&self, i: usize) -> &str {
        &self.addrs[i]
    }

    /// The shaping in place.
    pub fn shaping(&self) -> Shaping {
        self.shaping
    }

    /// The qdisc of party `i`'s end, as `tc qdisc show` prints it.
    pub fn qdisc(&self, i: usize) -> String {
        run(&["ip", "netns", "exec", &self.ns[i], "tc", "qdisc", "show"])
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("netem") || l.contains("tbf"))
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

impl Drop for NetemLink {
    fn drop(&mut self) {
        for ns in &self.ns {
            if !ns.is_empty() {
                let _ = run(&["ip", "netns", "del", ns]);
            }
        }
    }
}

/// A detached `sh` (new session, so Ctrl-C does not reach it) that, once process `pid` is gone
/// (whatever way it ended), stops the processes still inside the two namespaces (the party
/// processes this benchmark started there) and deletes the namespaces.
fn spawn_janitor(pid: u32, ns: &[String; 2]) {
    let (a, b) = (&ns[0], &ns[1]);
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         for p in $(ip netns pids {a} 2>/dev/null) $(ip netns pids {b} 2>/dev/null); do \
         kill $p 2>/dev/null; done; ip netns del {a} 2>/dev/null; ip netns del {b} 2>/dev/null"
    );
    let _ = Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// A one-connection TCP delay line: accepts one connection on `listen`, connects to `upstream`
/// and forwards both directions, holding every chunk for `one_way` after it was read (order
/// kept, no loss). With the veth's `tbf` rate limit it emulates `netem delay … rate …` where the
/// kernel lacks `sch_netem`. Unlike netem, the relay buffers without bound, so TCP's window
/// never meets the bandwidth-delay product: a best case for the real link. Every accept,
/// connect and read gives up after `idle`.
pub fn run_delay_relay(
    listen: &str,
    upstream: &str,
    one_way: Duration,
    idle: Duration,
) -> Result<(), NetemError> {
    let l = TcpListener::bind(listen).map_err(relay("bind"))?;
    l.set_nonblocking(true).map_err(relay("set_nonblocking"))?;
    let start = Instant::now();
    let down = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > idle {
                    return Err(NetemError::RelayIdle { waited: idle });
                }
                thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(relay("accept")(e)),
        }
    };
    down.set_nonblocking(false)
        .map_err(relay("set_nonblocking"))?;
    let start = Instant::now();
    let up = loop {
        match TcpStream::connect(upstream) {
            Ok(s) => break s,
            Err(e) if start.elapsed() > idle => return Err(relay("connect")(e)),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    };
    for s in [&down, &up] {
        s.set_nodelay(true).map_err(relay("set_nodelay"))?;
        s.set_read_timeout(Some(idle))
            .map_err(relay("set_read_timeout"))?;
    }
    let clone = |s: &TcpStream| s.try_clone().map_err(relay("clone a socket"));
    let a = pump(clone(&down)?, clone(&up)?, one_way);
    let b = pump(up, down, one_way);
    let ra = a.join().map_err(|_| NetemError::RelayThread)?;
    let rb = b.join().map_err(|_| NetemError::RelayThread)?;
    ra.and(rb)
}

/// Forwards `from` → `to`, each chunk released `delay` after it was read.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
) -> thread::JoinHandle<Result<(), NetemError>> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = thread::spawn(move || -> Result<(), NetemError> {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            to.write_all(&chunk).map_err(relay("write"))?;
        }
        let _ = to.shutdown(Shutdown::Write);
        Ok(())
    });
    thread::spawn(move || -> Result<(), NetemError> {
        let mut buf = vec![0u8; 1 << 16];
        let read = loop {
            match from.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break Err(NetemError::RelayThread);
                    }
                }
                Err(e) => break Err(relay("read")(e)),
            }
        };
        drop(tx);
        let wrote = writer.join().map_err(|_| NetemError::RelayThread)?;
        read.and(wrote)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The delay line forwards bytes unchanged in both directions and holds them for the delay.
    #[test]
    fn delay_relay_delays_and_preserves_bytes() {
        let up = TcpListener::bind("127.0.0.1:0").unwrap();
        let up_addr = up.local_addr().unwrap().to_string();
        // An echo server upstream.
        let echo = thread::spawn(move || {
            let (mut s, _) = up.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).unwrap();
            }
        });
        let listen = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let delay = Duration::from_millis(25);
        let l2 = listen.clone();
        let relay =
            thread::spawn(move || run_delay_relay(&l2, &up_addr, delay, Duration::from_secs(20)));
        let start = Instant::now();
        let mut c = loop {
            match TcpStream::connect(&listen) {
                Ok(c) => break c,
                Err(_) if start.elapsed() < Duration::from_secs(10) => {
                    thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        };
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let msg: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let t = Instant::now();
        c.write_all(&msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).unwrap();
        let rtt = t.elapsed();
        assert_eq!(back, msg);
        assert!(
            rtt >= 2 * delay,
            "round trip {rtt:?} shorter than twice the delay"
        );
        drop(c);
        relay.join().unwrap().unwrap();
        echo.join().unwrap();
    }
}
