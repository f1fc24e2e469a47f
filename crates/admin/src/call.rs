//! Requests to brokers and name servers: one call with a timeout, its
//! answer checked for success and its body read, and the lookups every
//! command starts from (cluster info, topic routes, the master brokers).

use std::{collections::BTreeSet, time::Duration};

use client_core::{route, split_addrs, CallError, Deadline, NameServers};
use remoting_net::{ClientOptions, ClientTls, RemotingClient};
use remoting_protocol::{
    acl::Credentials,
    body::{from_json, ClusterInfo, TopicRouteData},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde::de::DeserializeOwned;

use crate::error::{AdminError, Peer};

/// A connection pool to brokers and name servers, with the name servers to
/// ask and the timeout of each request.
#[derive(Debug)]
pub struct Admin {
    client: RemotingClient,
    namesrv: NameServers,
    timeout: Duration,
}

impl Admin {
    /// An admin client asking the name servers of `namesrv` (`host:port`,
    /// several separated by `;` or `,`), each request allowed `timeout`.
    pub fn new(namesrv: &str, timeout: Duration) -> Self {
        Self::with_credentials(namesrv, timeout, None)
    }

    /// As [`Admin::new`], signing every request with `credentials` when
    /// given (brokers and name servers with access control on).
    pub fn with_credentials(
        namesrv: &str,
        timeout: Duration,
        credentials: Option<Credentials>,
    ) -> Self {
        Self::with_security(namesrv, timeout, credentials, None)
    }

    /// As [`Admin::with_credentials`], every connection, to brokers and
    /// name servers alike, starting with the TLS handshake of `tls` when
    /// given.
    pub fn with_security(
        namesrv: &str,
        timeout: Duration,
        credentials: Option<Credentials>,
        tls: Option<ClientTls>,
    ) -> Self {
        let options = ClientOptions {
            connect_timeout: timeout,
            credentials,
            tls,
            ..ClientOptions::default()
        };
        Self {
            client: RemotingClient::new(options),
            namesrv: NameServers::new(split_addrs(namesrv)),
            timeout,
        }
    }

    /// The name server addresses, joined with `;`.
    pub fn namesrv_text(&self) -> String {
        self.namesrv.addrs().join(";")
    }

    /// Sends `request` to the `peer` at `addr` and returns the answer if it
    /// is `SUCCESS`.
    ///
    /// # Errors
    /// A timeout, a transport failure, or a refusal with its code and remark.
    pub async fn call(
        &self,
        peer: Peer,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        self.call_accepting(peer, addr, request, &[]).await
    }

    /// As [`Admin::call`], also accepting the codes in `accepted`.
    ///
    /// # Errors
    /// As [`Admin::call`].
    pub async fn call_accepting(
        &self,
        peer: Peer,
        addr: &str,
        request: RemotingCommand,
        accepted: &[ResponseCode],
    ) -> Result<RemotingCommand, AdminError> {
        let code = request.request_code();
        let timeout_ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let answer = match tokio::time::timeout(
            self.timeout,
            self.client.invoke(addr, request, self.timeout),
        )
        .await
        {
            Ok(Ok(answer)) => answer,
            Ok(Err(remoting_net::ClientError::Timeout { .. })) | Err(_) => {
                return Err(AdminError::Timeout {
                    peer,
                    addr: addr.to_owned(),
                    request: code,
                    timeout_ms,
                })
            }
            Ok(Err(e)) => {
                return Err(AdminError::Connection {
                    peer,
                    addr: addr.to_owned(),
                    request: code,
                    reason: e.to_string(),
                })
            }
        };
        let status = answer.response_code();
        if status == ResponseCode::SUCCESS || accepted.contains(&status) {
            Ok(answer)
        } else {
            Err(AdminError::Refused {
                peer,
                addr: addr.to_owned(),
                request: code,
                code: status,
                remark: answer.remark.unwrap_or_default(),
            })
        }
    }

    /// Sends `request` to the broker at `addr` and reads the JSON body of its
    /// successful answer.
    ///
    /// # Errors
    /// As [`Admin::call`], or a body that is not the expected document.
    pub async fn broker_json<T: DeserializeOwned>(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<T, AdminError> {
        let code = request.request_code();
        let answer = self.call(Peer::Broker, addr, request).await?;
        from_json(&answer.body).map_err(|e| AdminError::BadAnswer {
            peer: Peer::Broker,
            addr: addr.to_owned(),
            request: code,
            reason: e.to_string(),
        })
    }

    /// Each name server address, in the order given.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv.addrs().to_vec()
    }

    /// Sends the request `make` builds to the name servers in turn and
    /// returns the first successful answer with the address that gave it.
    ///
    /// # Errors
    /// The last name server's failure when none answered.
    pub async fn namesrv_call(
        &self,
        make: impl Fn() -> RemotingCommand,
    ) -> Result<(String, RemotingCommand), AdminError> {
        let mut last = AdminError::NoNameServer;
        for (index, addr) in self.namesrv.in_turn() {
            match self.call(Peer::NameServer, addr, make()).await {
                Ok(answer) => {
                    self.namesrv.answered(index);
                    return Ok((addr.to_owned(), answer));
                }
                Err(e) => {
                    self.namesrv.failed(index);
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// The clusters and brokers the name servers know
    /// (`GET_BROKER_CLUSTER_INFO`), from the first name server that answers.
    ///
    /// # Errors
    /// The last name server's failure when none answered.
    pub async fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        let mut last = AdminError::NoNameServer;
        for (index, addr) in self.namesrv.in_turn() {
            let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
            let answer = match self.call(Peer::NameServer, addr, request).await {
                Ok(a) => a,
                Err(e) => {
                    self.namesrv.failed(index);
                    last = e;
                    continue;
                }
            };
            self.namesrv.answered(index);
            return from_json(&answer.body).map_err(|e| AdminError::BadAnswer {
                peer: Peer::NameServer,
                addr: addr.to_owned(),
                request: RequestCode::GET_BROKER_CLUSTER_INFO,
                reason: e.to_string(),
            });
        }
        Err(last)
    }

    /// The master address of every broker the name servers know, sorted.
    ///
    /// # Errors
    /// As [`Admin::cluster_info`], or [`AdminError::NoBrokers`] when there is
    /// none.
    pub async fn master_addrs(&self) -> Result<Vec<String>, AdminError> {
        let info = self.cluster_info().await?;
        let masters: BTreeSet<String> = info
            .broker_addr_table
            .values()
            .filter_map(|b| b.master_addr().map(str::to_owned))
            .collect();
        if masters.is_empty() {
            return Err(AdminError::NoBrokers {
                namesrv: self.namesrv_text(),
            });
        }
        Ok(masters.into_iter().collect())
    }

    /// `broker` when given, else every master broker.
    ///
    /// # Errors
    /// As [`Admin::master_addrs`].
    pub async fn targets(&self, broker: Option<&str>) -> Result<Vec<String>, AdminError> {
        match broker {
            Some(addr) => Ok(vec![addr.to_owned()]),
            None => self.master_addrs().await,
        }
    }

    /// The route of `topic` (`GET_ROUTEINFO_BY_TOPIC`); `None` when the name
    /// servers know none.
    ///
    /// # Errors
    /// The name servers' failure, with the request named.
    pub async fn route(&self, topic: &str) -> Result<Option<TopicRouteData>, AdminError> {
        if self.namesrv.addrs().is_empty() {
            return Err(AdminError::NoNameServer);
        }
        let deadline = Deadline::new(self.timeout * 2);
        route::query(&self.client, &self.namesrv, topic, self.timeout, &deadline)
            .await
            .map_err(|e| self.route_error(e))
    }

    /// The master addresses of `route`'s brokers, sorted.
    pub fn route_masters(route: &TopicRouteData) -> Vec<String> {
        let masters: BTreeSet<String> = route::master_addrs(route).into_values().collect();
        masters.into_iter().collect()
    }

    fn route_error(&self, e: CallError) -> AdminError {
        let request = RequestCode::GET_ROUTEINFO_BY_TOPIC;
        let peer = Peer::NameServer;
        match e {
            CallError::Timeout { addr, .. } => AdminError::Timeout {
                peer,
                addr: addr.unwrap_or_else(|| self.namesrv_text()),
                request,
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            },
            CallError::Connection { addr, source } => AdminError::Connection {
                peer,
                addr,
                request,
                reason: source.to_string(),
            },
            CallError::Broker {
                addr, code, remark, ..
            } => AdminError::Refused {
                peer,
                addr,
                request,
                code,
                remark,
            },
            CallError::Protocol { addr, reason } => AdminError::BadAnswer {
                peer,
                addr,
                request,
                reason,
            },
            CallError::NoRoute { topic } => AdminError::NoRoute {
                namesrv: self.namesrv_text(),
                topic,
            },
        }
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.client.close_all().await;
    }
}
