//! RocketMQ 5's gRPC protocol (`apache.rocketmq.v2`) as far as Sluice serves
//! it: the prost message types, the tonic `MessagingService` server trait and
//! a tonic client, generated at build time from `proto/`.

/// Package `apache.rocketmq.v2`: messages, enums, server and client.
#[allow(missing_docs, clippy::all)]
pub mod v2 {
    tonic::include_proto!("apache.rocketmq.v2");
}

pub use v2::messaging_service_client::MessagingServiceClient;
pub use v2::messaging_service_server::{MessagingService, MessagingServiceServer};

/// The full gRPC service name, as it appears in request paths.
pub const SERVICE_NAME: &str = "apache.rocketmq.v2.MessagingService";

#[cfg(test)]
mod tests {
    use super::v2::{Code, Message, SystemProperties};
    use prost::Message as _;

    #[test]
    fn code_values_match_the_protocol() {
        assert_eq!(Code::Ok as i32, 20000);
        assert_eq!(Code::InvalidReceiptHandle as i32, 40013);
        assert_eq!(Code::ClientIdRequired as i32, 40017);
        assert_eq!(Code::MessageNotFound as i32, 40401);
        assert_eq!(Code::TooManyRequests as i32, 42900);
        assert_eq!(Code::MasterPersistenceTimeout as i32, 50401);
    }

    #[test]
    fn system_properties_use_the_protocol_field_numbers() {
        let m = Message {
            system_properties: Some(SystemProperties {
                message_id: "A".into(),
                delivery_attempt: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let bytes = m.encode_to_vec();
        // field 3 (system_properties), length-delimited: tag 0x1a.
        assert_eq!(bytes[0], 0x1a);
        // inside: field 3 string (0x1a, len 1, 'A'), field 16 varint (0x80 0x01, 1).
        assert_eq!(&bytes[2..], &[0x1a, 0x01, b'A', 0x80, 0x01, 0x01]);
    }
}
