//! Authentication and authorization as RocketMQ 5's ACL 2.0.
//!
//! - [`model`]: users (super or normal, with an access key and secret) and
//!   their policies of allow and deny entries over resources ([`Pattern`])
//!   and [`Action`]s from source addresses.
//! - [`Metadata`]: the users and policies a broker holds, the decisions
//!   made from them, and the documents they are persisted as.
//! - [`grpc`]: the `authorization` header of the gRPC clients.
//!
//! Remoting signatures themselves are part of the wire format
//! (`remoting_protocol::acl`); this crate decides what a verified user may
//! do. A decision's refusal names the user, the action and the resource,
//! never a secret.

pub mod action;
pub mod grpc;
pub mod metadata;
pub mod model;
pub mod resource;

pub use action::Action;
pub use metadata::{Metadata, Requirement};
pub use model::{Acl, Decision, Entry, PolicyType, User, UserType};
pub use resource::{Pattern, Resource, ResourceType};

/// Why a request or an admin change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The requester could not be identified: no access key, an unknown or
    /// disabled user, or a signature that does not verify.
    #[error("{0}")]
    Unauthenticated(String),
    /// The identified user may not do this.
    #[error("{0}")]
    Denied(String),
    /// An admin request named a user or ACL that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An admin request's body or header is not valid.
    #[error("{0}")]
    Invalid(String),
}
