//! Feeds arbitrary requests, secrets and `authorization` headers to the
//! signature verifiers. They must never panic; a request signed with a
//! secret verifies with it and not with another key, and stops verifying when
//! its body changes; a gRPC header made with a secret verifies over its
//! date and not over another.
#![no_main]

use auth::grpc::{self, Authorization};
use libfuzzer_sys::{arbitrary, fuzz_target};
use remoting_protocol::{
    acl::{self, Credentials},
    RemotingCommand, RequestCode,
};

#[derive(Debug, arbitrary::Arbitrary)]
struct Input {
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    version: i16,
    access_key: String,
    secret: String,
    other_secret: String,
    header: String,
    date: String,
}

fuzz_target!(|input: Input| {
    let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE);
    request.version = i32::from(input.version);
    for (k, v) in &input.fields {
        request
            .ext_fields
            .insert(k.as_str().into(), v.as_str().into());
    }
    request.body = input.body.clone().into();
    // Whatever arrived, checking it is safe.
    let _ = acl::verify(&request, input.secret.as_bytes());
    let _ = acl::access_key(&request);

    acl::sign(
        &mut request,
        &Credentials::new(&input.access_key, &input.secret),
    );
    assert!(acl::verify(&request, input.secret.as_bytes()));
    // HMAC pads keys of up to 64 bytes with zeros, so secrets that differ
    // only in trailing NUL bytes are one key; others must not verify.
    let key = |s: &str| s.trim_end_matches('\0').to_owned();
    if input.secret.len() <= 64
        && input.other_secret.len() <= 64
        && key(&input.other_secret) != key(&input.secret)
    {
        assert!(!acl::verify(&request, input.other_secret.as_bytes()));
    }
    let mut changed = request.clone();
    let mut body = input.body.clone();
    body.push(0);
    changed.body = body.into();
    assert!(!acl::verify(&changed, input.secret.as_bytes()));

    if let Ok(Some(auth)) = Authorization::parse(&input.header) {
        let _ = auth.verify(input.secret.as_bytes(), &input.date);
    }
    if !input.access_key.is_empty()
        && !input.access_key.contains([',', '/', ' ', '='])
        && input.access_key.trim() == input.access_key
    {
        let header = grpc::sign(&input.access_key, input.secret.as_bytes(), &input.date);
        let auth = Authorization::parse(&header)
            .expect("a header it made parses")
            .expect("with its access key");
        assert_eq!(auth.access_key, input.access_key);
        assert!(auth.verify(input.secret.as_bytes(), &input.date));
        let other_date = format!("{}x", input.date);
        assert!(!auth.verify(input.secret.as_bytes(), &other_date));
    }
});
