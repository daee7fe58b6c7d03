//! The kube glue against a mocked API server (tower-test): which requests the L2Network
//! reconciler sends, and what it patches.
use std::sync::Arc;

use http::{Request, Response};
use kube::{Client, client::Body, runtime::controller::Action};

use super::kube::{Ctx, KubeError, error_policy, reconcile_l2network};
use crate::{
    api::{L2Network, l2network::L2NetworkSpec},
    controller::Config,
};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn list(kind: &str, items: serde_json::Value) -> Response<Body> {
    let body = serde_json::json!({
        "apiVersion": "juneau.loutres.me/v1alpha1",
        "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "1"},
        "items": items,
    });
    Response::builder()
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
}

async fn expect_lists(handle: &mut Handle, nets: serde_json::Value) {
    let (req, send) = handle
        .next_request()
        .await
        .expect("the reconciler lists L2Networks");
    assert_eq!(req.method(), http::Method::GET);
    assert!(
        req.uri()
            .path()
            .ends_with("/apis/juneau.loutres.me/v1alpha1/l2networks"),
        "{}",
        req.uri()
    );
    send.send_response(list("L2Network", nets));
    let (req, send) = handle
        .next_request()
        .await
        .expect("the reconciler lists Subnets");
    assert!(
        req.uri()
            .path()
            .ends_with("/apis/juneau.loutres.me/v1alpha1/subnets"),
        "{}",
        req.uri()
    );
    send.send_response(list("Subnet", serde_json::json!([{
        "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
        "metadata": {"name": "web"}, "spec": {"vpc": "t", "cidr": "10.1.0.0/24"}, "status": {"vni": 2}
    }])));
}

fn ctx(client: Client) -> Arc<Ctx> {
    Arc::new(Ctx {
        client,
        cfg: Config::default(),
    })
}

fn lab() -> L2Network {
    L2Network::new(
        "lab",
        L2NetworkSpec {
            vpc: "t".into(),
            cidr: Some("10.9.0.0/24".into()),
            ..Default::default()
        },
    )
}

#[tokio::test]
async fn l2_22_l2_23_reconcile_patches_status_with_a_vni_not_held_by_a_subnet() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let server = tokio::spawn(async move {
        let obj = serde_json::to_value(lab()).unwrap();
        expect_lists(&mut handle, serde_json::json!([obj])).await;
        let (req, send) = handle
            .next_request()
            .await
            .expect("the reconciler patches the status");
        assert_eq!(req.method(), http::Method::PATCH);
        assert!(
            req.uri().path().ends_with("/l2networks/lab/status"),
            "{}",
            req.uri()
        );
        assert!(
            req.uri()
                .query()
                .unwrap_or("")
                .contains("fieldManager=juneau-controller"),
            "{}",
            req.uri()
        );
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        assert_eq!(
            body["status"]["vni"], 3,
            "VNI 2 is held by Subnet web: {body}"
        );
        assert_eq!(body["status"]["mtu"], 1450);
        let mut patched = serde_json::to_value(lab()).unwrap();
        patched["status"] = body["status"].clone();
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&patched).unwrap()))
                .unwrap(),
        );
    });
    let action = reconcile_l2network(Arc::new(lab()), ctx(client))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(300)));
    server.await.unwrap();
}

#[tokio::test]
async fn l2_23_reconcile_of_an_up_to_date_status_sends_no_patch() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let mut current = lab();
    current.status = Some(
        crate::controller::l2network::reconcile_all(
            &crate::admission::Snapshot {
                l2networks: vec![lab()],
                subnets: vec![crate::api::Subnet::new(
                    "web",
                    crate::api::subnet::SubnetSpec {
                        vpc: "t".into(),
                        cidr: "10.1.0.0/24".into(),
                        network_acl: None,
                    },
                )],
                ..Default::default()
            },
            &Config::default(),
        )["lab"]
            .clone(),
    );
    current.status.as_mut().unwrap().vni = 3;
    let obj = serde_json::to_value(&current).unwrap();
    let server = tokio::spawn(async move {
        expect_lists(&mut handle, serde_json::json!([obj])).await;
        if let Ok(Some((req, _))) =
            tokio::time::timeout(std::time::Duration::from_millis(200), handle.next_request()).await
        {
            let body = req.into_body().collect_bytes().await.unwrap();
            panic!(
                "an up-to-date status was patched again: {}",
                String::from_utf8_lossy(&body)
            );
        }
    });
    reconcile_l2network(Arc::new(current), ctx(client))
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn l2_22_api_errors_are_retried_after_a_pause() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let server = tokio::spawn(async move {
        let (_req, send) = handle.next_request().await.unwrap();
        let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd down", "reason": "InternalError", "code": 500});
        send.send_response(
            Response::builder()
                .status(500)
                .body(Body::from(serde_json::to_vec(&status).unwrap()))
                .unwrap(),
        );
    });
    let c = ctx(client);
    let err: KubeError = reconcile_l2network(Arc::new(lab()), c.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("etcd down"), "{err}");
    assert_eq!(
        error_policy(Arc::new(lab()), &err, c),
        Action::requeue(std::time::Duration::from_secs(5))
    );
    server.await.unwrap();
}
