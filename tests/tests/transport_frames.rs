//! The frame reader against a peer that lies about lengths: a header that declares 1 GiB (the
//! default limit) and then silence must end in a typed timeout without the receiver reserving the
//! declared gigabyte, over TCP loopback and in memory.

use std::net::TcpListener;
use std::time::{Duration, Instant};
use veil_host::transport::{
    mem_pair, TcpTransport, Transport, TransportConfig, TransportError, HEADER_LEN, MAGIC,
    WIRE_VERSION,
};

/// Resident set size of this process in bytes (`/proc/self/statm`, field 2, in pages).
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn lying_header(len: u32) -> Vec<u8> {
    let mut h = vec![MAGIC, WIRE_VERSION];
    h.extend_from_slice(&0x0201u16.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    assert_eq!(h.len(), HEADER_LEN);
    h
}

fn cfg() -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_millis(400),
        max_frame: 1 << 30,
    }
}

#[test]
fn gigabyte_header_then_silence_over_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let liar = std::thread::spawn(move || {
        let mut t = TcpTransport::connect(addr, cfg()).unwrap();
        // The header plus 64 KiB of payload, then nothing: the connection stays open.
        let mut bytes = lying_header(1 << 30);
        bytes.extend_from_slice(&[0x5A; 1 << 16]);
        t.send_raw(bytes).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
    });
    let mut rx = TcpTransport::accept(&listener, cfg()).unwrap();
    let before = rss_bytes();
    let t0 = Instant::now();
    let got = rx.recv();
    let waited = t0.elapsed();
    let after = rss_bytes();
    assert_eq!(got.unwrap_err(), TransportError::Timeout);
    assert!(
        waited >= Duration::from_millis(350) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    if let (Some(b), Some(a)) = (before, after) {
        let grew = a.saturating_sub(b);
        println!("RSS before {b} B, after {a} B, grew {grew} B");
        assert!(grew < 16 << 20, "resident memory grew by {grew} bytes");
    }
    liar.join().unwrap();
}

#[test]
fn gigabyte_header_then_silence_in_memory() {
    let (mut a, mut b) = mem_pair(cfg());
    a.send_raw(lying_header(1 << 30)).unwrap();
    let before = rss_bytes();
    assert_eq!(b.recv().unwrap_err(), TransportError::Timeout);
    if let (Some(x), Some(y)) = (before, rss_bytes()) {
        assert!(y.saturating_sub(x) < 16 << 20);
    }
    // Over the limit: refused from the header alone, without waiting.
    let small = TransportConfig {
        timeout: Duration::from_secs(30),
        max_frame: 1 << 20,
    };
    let (mut a, mut b) = mem_pair(small);
    a.send_raw(lying_header(1 << 30)).unwrap();
    let t0 = Instant::now();
    assert_eq!(
        b.recv().unwrap_err(),
        TransportError::TooLarge {
            len: 1 << 30,
            max: 1 << 20
        }
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// `recv_limited` applies the tighter of its limits and the configured ones, on both
/// transports: a frame over its size limit is refused at its header, silence ends at its
/// deadline, a frame within both arrives; a looser limit than the configured one changes
/// nothing.
#[test]
fn limited_receive_takes_the_tighter_limits() {
    let long = TransportConfig {
        timeout: Duration::from_secs(30),
        max_frame: 1 << 20,
    };
    let tight = TransportConfig {
        timeout: Duration::from_millis(300),
        max_frame: 64,
    };
    assert_eq!(long.tighter(tight).max_frame, 64);
    assert_eq!(long.tighter(tight).timeout, tight.timeout);
    let frame = |n: usize| veil_core::mpc::Frame {
        tag: 0x0B01,
        depth: 0,
        payload: vec![7; n],
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || TcpTransport::connect(addr, long).unwrap());
    let mut server = TcpTransport::accept(&listener, long).unwrap();
    let mut client = peer.join().unwrap();
    let (mut a, mut b) = mem_pair(long);
    let pairs: [(&mut dyn Transport, &mut dyn Transport); 2] =
        [(&mut client, &mut server), (&mut a, &mut b)];
    for (tx, rx) in pairs {
        // Silence: a timeout at the tight deadline, not the configured 30 s.
        let t0 = Instant::now();
        assert_eq!(rx.recv_limited(tight).unwrap_err(), TransportError::Timeout);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        // Within both limits.
        tx.send(vec![frame(64)]).unwrap();
        assert_eq!(rx.recv_limited(tight).unwrap().payload.len(), 64);
        // Looser than configured: a frame within the configured limits arrives.
        let loose = TransportConfig {
            timeout: Duration::from_secs(60),
            max_frame: 1 << 30,
        };
        tx.send(vec![frame(1000)]).unwrap();
        assert_eq!(rx.recv_limited(loose).unwrap().payload.len(), 1000);
        // Over the tight size limit: refused at the header.
        tx.send(vec![frame(65)]).unwrap();
        assert_eq!(
            rx.recv_limited(tight).unwrap_err(),
            TransportError::TooLarge { len: 65, max: 64 }
        );
    }
    // The configured size limit holds under looser limits too (its own pair: a refused frame
    // is left unread on the stream).
    let (mut a, mut b) = mem_pair(long);
    let loose = TransportConfig {
        timeout: Duration::from_secs(60),
        max_frame: 1 << 30,
    };
    a.send(vec![frame((1 << 20) + 1)]).unwrap();
    assert_eq!(
        b.recv_limited(loose).unwrap_err(),
        TransportError::TooLarge {
            len: (1 << 20) + 1,
            max: 1 << 20
        }
    );
}
