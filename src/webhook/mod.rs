//! The admission webhook: HTTPS (axum + rustls) around the pure rules of
//! `admission::validate`. It reads the cluster through the [`Cluster`] interface: the embedded store
//! in standalone mode and tests, the API server's caches in a cluster.
use std::{net::SocketAddr, sync::Arc};

use axum::{Json, Router, extract::State, routing::post};
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
};

use crate::{
    admission::{Rejection, Request, Snapshot, admit},
    api::Object,
    cluster::Cluster,
};

/// Where the webhook reads the objects its rules look at.
pub type Source = Arc<dyn Cluster>;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("TLS configuration: {0}")]
    Tls(std::io::Error),
    #[error("serving: {0}")]
    Serve(std::io::Error),
}

/// The request's object (or old object) as the typed [`Object`] of its kind; `None`
/// for a kind that is no Juneau object (a Pod, a kind without rules).
fn object(
    req: &AdmissionRequest<DynamicObject>,
    o: &Option<DynamicObject>,
) -> Result<Option<Object>, Rejection> {
    if !Object::KINDS.contains(&req.kind.kind.as_str()) {
        return Ok(None);
    }
    let o = o.as_ref().ok_or_else(missing)?;
    let mut v = serde_json::to_value(o).map_err(|e| unreadable(e.to_string()))?;
    if let Some(m) = v.as_object_mut() {
        m.entry("kind")
            .or_insert_with(|| req.kind.kind.clone().into());
    }
    Object::from_value(v)
        .map(Some)
        .map_err(|e| unreadable(e.to_string()))
}

/// True when an update leaves `spec` as it was.
fn spec_unchanged(req: &AdmissionRequest<DynamicObject>) -> bool {
    let spec = |o: &Option<DynamicObject>| o.as_ref().map(|o| o.data.get("spec").cloned());
    spec(&req.object) == spec(&req.old_object)
}

fn unreadable(e: String) -> Rejection {
    Rejection {
        field: "object".into(),
        message: format!("cannot be read: {e}"),
    }
}

/// The verdict for one request (pure): the request read into its typed object, then
/// judged by the one dispatcher the embedded store uses too (`admission::admit`).
pub fn review(req: &AdmissionRequest<DynamicObject>, snap: &Snapshot) -> AdmissionResponse {
    let verdict: Result<(), Rejection> = (|| match (req.kind.kind.as_str(), &req.operation) {
        ("Pod", Operation::Create) => {
            let pod = req.object.as_ref().ok_or_else(missing)?;
            let record = crate::api::PodRecord {
                namespace: req.namespace.clone().unwrap_or_default(),
                name: req.name.clone(),
                annotations: pod.metadata.annotations.clone().unwrap_or_default(),
                labels: pod.metadata.labels.clone().unwrap_or_default(),
                ..Default::default()
            };
            admit(Request::CreatePod(&record), snap)
        }
        // A metadata-only update (labels, finalizers) of a kind whose spec edits are held
        // to the creation rules passes unread, so that objects that already clash, or
        // no longer read, can still be labelled and deleted.
        ("ExternalNetwork" | "AddressPool" | "NetworkACL" | "SecurityGroup", Operation::Update)
            if spec_unchanged(req) =>
        {
            Ok(())
        }
        (kind, Operation::Delete) => admit(
            Request::Delete {
                kind,
                name: &req.name,
            },
            snap,
        ),
        (_, Operation::Create) => match object(req, &req.object)? {
            Some(new) => admit(Request::Create(&new), snap),
            None => Ok(()),
        },
        (_, Operation::Update) => {
            match (object(req, &req.old_object)?, object(req, &req.object)?) {
                (Some(old), Some(new)) => admit(
                    Request::Update {
                        old: &old,
                        new: &new,
                    },
                    snap,
                ),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    })();
    let response = AdmissionResponse::from(req);
    match verdict {
        Ok(()) => response,
        Err(rejection) => response.deny(rejection.to_string()),
    }
}

/// What the mutating half does besides L2-27's dnsPolicy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mutation {
    /// `--enable-probe-rewrite`: the daemons' probe port (`admission::probes`).
    pub probe_port: Option<u16>,
}

/// The mutation for one request (pure): a Pod whose eth0 is on an L2Network gets
/// `dnsPolicy: Default` (L2-27), as the embedded store applies it; with
/// `--enable-probe-rewrite`, a Pod without a route from its Node gets its probes
/// through the Node's daemon (the request's UID is the token naming it there).
pub fn mutate(
    req: &AdmissionRequest<DynamicObject>,
    snap: &Snapshot,
    how: Mutation,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    if (req.kind.kind.as_str(), &req.operation) != ("Pod", &Operation::Create) {
        return response;
    }
    let Some(pod) = req.object.as_ref() else {
        return response.deny(missing().to_string());
    };
    let record = crate::api::PodRecord {
        namespace: req.namespace.clone().unwrap_or_default(),
        name: req.name.clone(),
        node: String::new(),
        annotations: pod.metadata.annotations.clone().unwrap_or_default(),
        dns_policy: pod
            .data
            .pointer("/spec/dnsPolicy")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned(),
        ..Default::default()
    };
    let mut ops = Vec::new();
    if let Some(policy) = crate::admission::dns_policy(&record, snap) {
        // RFC 6902: `add` replaces a member that exists.
        ops.push(serde_json::json!({"op": "add", "path": "/spec/dnsPolicy", "value": policy}));
    }
    let mut warnings = Vec::new();
    if let Some(port) = how.probe_port
        && let Some(rewrite) = crate::admission::probes::rewrite(
            &serde_json::json!({"metadata": pod.metadata, "spec": pod.data["spec"]}),
            &record.namespace,
            &req.uid,
            port,
        )
    {
        ops.extend(rewrite.patch);
        warnings = rewrite.warnings;
    }
    let mut response = if ops.is_empty() {
        response
    } else {
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array(ops)).expect("a well-formed patch");
        match response.clone().with_patch(patch) {
            Ok(r) => r,
            Err(e) => return response.deny(format!("cannot write the Pod's patch: {e}")),
        }
    };
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

fn missing() -> Rejection {
    Rejection {
        field: "request".into(),
        message: "carries no object".into(),
    }
}

/// Which half of the webhook answers a review.
#[derive(Clone, Copy, Debug)]
pub enum Half {
    Validate,
    Mutate(Mutation),
}

/// Answers one decoded review over the cluster's objects (pure: the handlers and the
/// fuzz target share it). A cluster that cannot be read denies (fail closed).
pub fn answer_with(
    review_in: AdmissionReview<DynamicObject>,
    snap: Result<&Snapshot, String>,
    half: Half,
) -> AdmissionReview<DynamicObject> {
    let req: AdmissionRequest<DynamicObject> = match review_in.try_into() {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(e.to_string()).into_review(),
    };
    match snap {
        Ok(snap) => match half {
            Half::Validate => review(&req, snap),
            Half::Mutate(how) => mutate(&req, snap, how),
        }
        .into_review(),
        Err(e) => {
            tracing::error!(error = %e, "admission without a view of the cluster");
            AdmissionResponse::from(&req).deny(e).into_review()
        }
    }
}

/// Reads the cluster and answers. The read blocks (a `Cluster` is synchronous; the
/// Kubernetes one drives a runtime of its own), so it runs on a blocking thread, never
/// on the server's async workers.
async fn answer(
    source: Source,
    review_in: AdmissionReview<DynamicObject>,
    half: Half,
) -> Json<AdmissionReview<DynamicObject>> {
    let uid = review_in.request.as_ref().map(|r| r.uid.clone());
    let answered = tokio::task::spawn_blocking(move || {
        let world = source.read();
        let snap = world
            .as_ref()
            .map(|(w, _)| &w.objects)
            .map_err(|e| e.to_string());
        answer_with(review_in, snap, half)
    })
    .await;
    match answered {
        Ok(review) => Json(review),
        Err(e) => {
            tracing::error!(error = %e, "admission review panicked");
            let mut response = AdmissionResponse::invalid(format!("the webhook failed: {e}"));
            if let Some(uid) = uid {
                response.uid = uid;
            }
            Json(response.into_review())
        }
    }
}

async fn mutate_handler(
    State((source, how)): State<(Source, Mutation)>,
    Json(review_in): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    answer(source, review_in, Half::Mutate(how)).await
}

async fn validate_handler(
    State((source, _)): State<(Source, Mutation)>,
    Json(review_in): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    answer(source, review_in, Half::Validate).await
}

/// The routes: `POST /validate` and `POST /mutate` (both halves of `admission`).
pub fn router(source: Source, how: Mutation) -> Router {
    Router::new()
        .route("/validate", post(validate_handler))
        .route("/mutate", post(mutate_handler))
        .with_state((source, how))
}

/// Serves HTTPS on `addr` with the certificate and key read from files, and reads them
/// again when either file changes (checked every 10 s), so that a rotated Secret takes
/// effect without a restart. Runs until the process ends.
pub async fn serve_files(
    addr: SocketAddr,
    cert: &std::path::Path,
    key: &std::path::Path,
    source: Source,
    how: Mutation,
) -> Result<(), WebhookError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(WebhookError::Tls)?;
    let (cert, key) = (cert.to_owned(), key.to_owned());
    let reload = tls.clone();
    tokio::spawn(async move {
        let stamp = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut seen = (stamp(&cert), stamp(&key));
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            let now = (stamp(&cert), stamp(&key));
            if now == seen {
                continue;
            }
            match reload.reload_from_pem_file(&cert, &key).await {
                Ok(()) => {
                    tracing::info!(cert = %cert.display(), "webhook certificate reloaded");
                    seen = now;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "new webhook certificate not loaded; serving the old one")
                }
            }
        }
    });
    tracing::info!(%addr, "admission webhook serving /validate and /mutate");
    axum_server::bind_rustls(addr, tls)
        .serve(router(source, how).into_make_service())
        .await
        .map_err(WebhookError::Serve)
}

/// Serves HTTPS on `addr` with the PEM certificate and key until `handle` shuts it down.
pub async fn serve(
    addr: SocketAddr,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    source: Source,
    how: Mutation,
    handle: axum_server::Handle,
) -> Result<(), WebhookError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert_pem, key_pem)
        .await
        .map_err(WebhookError::Tls)?;
    axum_server::bind_rustls(addr, tls)
        .handle(handle)
        .serve(router(source, how).into_make_service())
        .await
        .map_err(WebhookError::Serve)
}
