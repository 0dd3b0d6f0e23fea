//! The listener: HTTP/1.1 and HTTP/2 over TCP with the time limits axum's own
//! `serve` does not set. A client that opens connections and sends nothing, sends
//! its headers a byte at a time, or trickles a body, holds a connection for
//! seconds, not forever.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Time limits of the listener.
#[derive(Debug, Clone)]
pub struct ListenLimits {
    /// To receive a request's headers, and how long a kept-alive connection may sit
    /// idle before its next request (HTTP/1).
    pub header_read: Duration,
    /// From a request's first byte to the end of its response, body included.
    pub request: Duration,
    /// HTTP/2: a ping every this often, and the connection closed when one is not
    /// answered in as long.
    pub keep_alive: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits {
            header_read: Duration::from_secs(10),
            request: Duration::from_secs(60),
            keep_alive: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` until `shutdown`; then stops accepting and lets the
/// connections in flight finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ListenLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let request_limit = limits.request;
    let router = router.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| async move {
            match tokio::time::timeout(request_limit, next.run(req)).await {
                Ok(response) => response,
                Err(_) => axum::response::IntoResponse::into_response((
                    axum::http::StatusCode::REQUEST_TIMEOUT,
                    "the request took too long\n",
                )),
            }
        },
    ));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.keep_alive)
        .keep_alive_timeout(limits.keep_alive);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let first_byte = limits.header_read;
        tokio::spawn(async move {
            // The HTTP version is told from the first bytes, and no timer of hyper's
            // runs while it waits for them: a client that sends nothing is dropped here.
            let mut byte = [0u8; 1];
            if !matches!(
                tokio::time::timeout(first_byte, stream.peek(&mut byte)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    // In-flight requests finish; a connection that would not close within the
    // request limit is dropped.
    let _ = tokio::time::timeout(limits.request, graceful.shutdown()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A server with short limits; its address and the token that stops it.
    async fn server() -> (
        std::net::SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let router = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/echo", post(|body: axum::body::Bytes| async move { body }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let token = CancellationToken::new();
        let limits = ListenLimits {
            header_read: Duration::from_secs(1),
            request: Duration::from_secs(2),
            keep_alive: Duration::from_secs(1),
        };
        let task = tokio::spawn({
            let token = token.clone();
            async move {
                serve(listener, router, limits, token).await.expect("serve");
            }
        });
        (addr, token, task)
    }

    /// Reads until the server closes the connection; what it sent. Fails the test
    /// when the server keeps it open.
    async fn until_closed(stream: &mut TcpStream) -> String {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
            .await
            .expect("the server closes the connection")
            .ok();
        String::from_utf8_lossy(&got).into_owned()
    }

    #[tokio::test]
    async fn a_client_that_sends_nothing_or_half_its_headers_is_disconnected() {
        let (addr, _token, _task) = server().await;
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("write");
        assert_eq!(until_closed(&mut silent).await, "");
        let answer = until_closed(&mut slow).await;
        assert!(!answer.contains("200 OK"), "{answer}");
    }

    #[tokio::test]
    async fn a_kept_alive_connection_is_closed_when_idle() {
        let (addr, _token, _task) = server().await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let answer = until_closed(&mut conn).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    }

    #[tokio::test]
    async fn a_trickled_body_gets_408() {
        let (addr, _token, _task) = server().await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
            .await
            .expect("write");
        let answer = until_closed(&mut conn).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }

    #[tokio::test]
    async fn shutdown_stops_accepting_and_returns() {
        let (addr, token, task) = server().await;
        token.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("serve returns")
            .expect("no panic");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer listening"
        );
    }
}
