//! AdmissionReview bodies as the API server (or anyone reaching the port) sends them:
//! both halves answer every decodable review with a response for its uid.
#![no_main]
use juneau::webhook::{Half, answer_with};
use juneau_fuzz::snapshot;
use kube::core::{DynamicObject, admission::AdmissionReview};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body) else {
        return;
    };
    let uid = review.request.as_ref().map(|r| r.uid.clone());
    for half in [Half::Validate, Half::Mutate] {
        let out = answer_with(review.clone(), Ok(snapshot()), half);
        let response = out.response.as_ref().expect("a review without a response");
        if let Some(uid) = &uid {
            assert_eq!(&response.uid, uid, "answered another request");
        }
        serde_json::to_vec(&out).expect("responses serialize");
    }
});
