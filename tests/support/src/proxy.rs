//! A TCP proxy that can be switched off: a network outage between the gateway and its database,
//! on demand.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Forwards every connection to 127.0.0.1:`target` port until [`TcpProxy::down`]; then closes
/// every connection and refuses new ones (accepts and closes at once) until [`TcpProxy::up`].
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    up: AtomicBool,
    stopping: AtomicBool,
    /// Both ends of every forwarded connection, to cut them all at once.
    open: Mutex<Vec<TcpStream>>,
}

impl TcpProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `target`.
    pub fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        // Non-blocking, so the acceptor notices the proxy being dropped.
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let shared = Arc::new(Shared {
            up: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = shared.clone();
            std::thread::spawn(move || accept_loop(&listener, target, &shared))
        };
        TcpProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection and refuses new ones.
    pub fn down(&self) {
        self.shared.up.store(false, Ordering::SeqCst);
        self.shared.cut_all();
    }

    /// Forwards again.
    pub fn up(&self) {
        self.shared.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.cut_all();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

impl Shared {
    fn cut_all(&self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        for stream in open.drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, shared: &Arc<Shared>) {
    while !shared.stopping.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => continue,
        };
        if !shared.up.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let _ = client.set_nonblocking(false);
        let Ok(server) = TcpStream::connect(target) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let (Ok(client_read), Ok(server_read)) = (client.try_clone(), server.try_clone()) else {
            continue;
        };
        {
            let mut open = shared.open.lock().unwrap_or_else(|e| e.into_inner());
            if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
                open.push(c);
                open.push(s);
            }
        }
        // Went down while this one was being connected: cut it too.
        if !shared.up.load(Ordering::SeqCst) {
            shared.cut_all();
        }
        std::thread::spawn(move || pipe(client_read, server));
        std::thread::spawn(move || pipe(server_read, client));
    }
}

/// Copies `from` to `to` until either closes, then closes both directions.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
