//! `/metrics` (Prometheus text) and `/healthz` of the daemon, over plain HTTP on a
//! thread of its own (a current-thread runtime: the daemon's other threads are plain
//! OS threads in the Node's namespace).
use std::{net::SocketAddr, sync::Arc};

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};

use super::agent::Agent;

async fn metrics(State(agent): State<Arc<Agent>>) -> impl IntoResponse {
    // Counting learned entries walks whole tables: off the async thread, and the
    // dataplane lock is held only to take handles on them (`Metrics::render`).
    let body = tokio::task::spawn_blocking(move || agent.metrics.render(&agent.dataplane))
        .await
        .unwrap_or_else(|e| format!("# metrics failed: {e}\n"));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// Binds `addr`: called before the daemon touches anything, so that a taken port
/// fails the start before any map is written.
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves `/metrics` and `/healthz` on a bound listener from a new thread.
pub fn serve(agent: Arc<Agent>, listener: std::net::TcpListener) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "metrics listener");
                    return;
                }
            };
            let app = Router::new()
                .route("/metrics", get(metrics))
                .route("/healthz", get(healthz))
                .with_state(agent);
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "metrics server stopped");
            }
        })
    });
    Ok(())
}
