//! A TCP proxy the test controls, between meshward and its database: the database
//! going away (every connection dropped, new ones refused) and coming back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
    cuts: watch::Sender<u64>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let up = Arc::new(AtomicBool::new(true));
        let refused = Arc::new(AtomicUsize::new(0));
        let (cuts, _) = watch::channel(0u64);
        let (up2, refused2, cuts2) = (up.clone(), refused.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    refused2.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                let mut cut = cuts2.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            up,
            refused,
            cuts,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// Connections refused since the start.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }
}
