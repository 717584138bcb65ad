//! Client arbitration (specification section 5 "Client Arbitration and
//! Controller Replication"): per (device, role) the live stream with the
//! highest election id is the primary; only it may write.

use std::collections::HashMap;

use tokio::sync::mpsc;
use tonic::Status;
use turbonet_p4::google::rpc::{Code, Status as RpcStatus};
use turbonet_p4::p4::v1::{
    MasterArbitrationUpdate, Role, StreamMessageResponse, Uint128, stream_message_response,
};

/// The sending half of a controller's stream.
pub(crate) type StreamTx = mpsc::Sender<Result<StreamMessageResponse, Status>>;

#[derive(Debug)]
struct Controller {
    role: String,
    role_msg: Option<Role>,
    /// `None`: the controller sent no election id (allowed since v1.4 for
    /// controllers that never want to be primary).
    election_id: Option<u128>,
    tx: StreamTx,
}

/// Messages to send after an arbitration change, outside the lock.
pub(crate) type Outbox = Vec<(StreamTx, StreamMessageResponse)>;

#[derive(Debug, Default)]
pub(crate) struct Arbitration {
    controllers: HashMap<u64, Controller>,
    /// Highest election id seen per role, reported when there is no primary.
    highest: HashMap<String, u128>,
    next_stream: u64,
}

impl Arbitration {
    pub(crate) fn new_stream(&mut self) -> u64 {
        self.next_stream += 1;
        self.next_stream
    }

    /// (stream, election id) of the role's primary.
    pub(crate) fn primary(&self, role: &str) -> Option<(u64, u128)> {
        self.controllers
            .iter()
            .filter(|(_, c)| c.role == role)
            .filter_map(|(s, c)| c.election_id.map(|e| (*s, e)))
            .max_by_key(|(_, e)| *e)
    }

    /// Whether a request with this role and election id comes from the
    /// role's primary (Write, SetForwardingPipelineConfig).
    pub(crate) fn is_primary(&self, role: &str, election_id: Option<u128>) -> bool {
        election_id.is_some() && self.primary(role).map(|(_, e)| e) == election_id
    }

    pub(crate) fn is_stream_primary(&self, stream: u64) -> bool {
        self.controllers
            .get(&stream)
            .is_some_and(|c| self.primary(&c.role).map(|(s, _)| s) == Some(stream))
    }

    pub(crate) fn is_registered(&self, stream: u64) -> bool {
        self.controllers.contains_key(&stream)
    }

    pub(crate) fn primaries(&self) -> Vec<StreamTx> {
        let mut roles: Vec<&String> = self.controllers.values().map(|c| &c.role).collect();
        roles.sort();
        roles.dedup();
        roles
            .into_iter()
            .filter_map(|r| self.primary(r))
            .filter_map(|(s, _)| self.controllers.get(&s).map(|c| c.tx.clone()))
            .collect()
    }

    /// Handles a MasterArbitrationUpdate on `stream` (device id already
    /// checked). Returns the answer to the sender and, when the primary
    /// changed, the notifications to the role's other controllers.
    pub(crate) fn update(
        &mut self,
        device_id: u64,
        stream: u64,
        update: &MasterArbitrationUpdate,
        tx: &StreamTx,
    ) -> Result<Outbox, Status> {
        let role_msg = update.role.clone();
        let role = role_msg
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default();
        let election_id = update.election_id.map(u128::from);
        if let Some(existing) = self.controllers.get(&stream)
            && existing.role != role
        {
            return Err(Status::failed_precondition(format!(
                "this stream arbitrated for role {:?}; a stream cannot change role",
                existing.role
            )));
        }
        if let Some(e) = election_id {
            let taken = self
                .controllers
                .iter()
                .any(|(s, c)| *s != stream && c.role == role && c.election_id == Some(e));
            if taken {
                return Err(Status::invalid_argument(format!(
                    "election id {e} is already used by another controller of role {role:?}"
                )));
            }
            let highest = self.highest.entry(role.clone()).or_default();
            *highest = (*highest).max(e);
        }
        let before = self.primary(&role);
        self.controllers.insert(
            stream,
            Controller {
                role: role.clone(),
                role_msg,
                election_id,
                tx: tx.clone(),
            },
        );
        let after = self.primary(&role);
        let mut out = vec![(tx.clone(), self.answer(device_id, stream))];
        if before.map(|p| p.0) != after.map(|p| p.0) {
            out.extend(self.notify_role(device_id, &role, Some(stream)));
        }
        Ok(out)
    }

    /// Forgets a closed stream; if it was the primary, tells the others.
    pub(crate) fn remove(&mut self, device_id: u64, stream: u64) -> Outbox {
        let was_primary = self.is_stream_primary(stream);
        match self.controllers.remove(&stream) {
            Some(c) if was_primary => self.notify_role(device_id, &c.role, None),
            _ => Vec::new(),
        }
    }

    fn notify_role(&self, device_id: u64, role: &str, except: Option<u64>) -> Outbox {
        self.controllers
            .iter()
            .filter(|(s, c)| c.role == role && Some(**s) != except)
            .map(|(s, c)| (c.tx.clone(), self.answer(device_id, *s)))
            .collect()
    }

    /// The arbitration answer for one controller: OK for the primary;
    /// ALREADY_EXISTS for a backup while there is a primary; NOT_FOUND when
    /// the role has no primary. The election id is the primary's, or the
    /// highest seen for the role when there is none.
    fn answer(&self, device_id: u64, stream: u64) -> StreamMessageResponse {
        let c = &self.controllers[&stream];
        let primary = self.primary(&c.role);
        let (code, message) = match primary {
            Some((s, _)) if s == stream => (Code::Ok, "primary".to_owned()),
            Some(_) => (
                Code::AlreadyExists,
                "a primary controller exists; this one is a backup".into(),
            ),
            None => (Code::NotFound, "the role has no primary controller".into()),
        };
        let election = primary
            .map(|p| p.1)
            .or_else(|| self.highest.get(&c.role).copied());
        StreamMessageResponse {
            update: Some(stream_message_response::Update::Arbitration(
                MasterArbitrationUpdate {
                    device_id,
                    role: c.role_msg.clone(),
                    election_id: election.map(Uint128::from),
                    status: Some(RpcStatus {
                        code: code as i32,
                        message,
                        details: vec![],
                    }),
                },
            )),
        }
    }
}
