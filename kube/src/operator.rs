//! The `Lab` operator (`turbonet kube operator`): for each [`Lab`] of the
//! namespace it watches, the objects `turbonet kube render` writes, owned
//! by the `Lab` (deleting it deletes them, and the workers take their parts
//! down), applied server-side; and the `Lab`'s status from its workers'
//! StatefulSet.
//!
//! What a `Lab` becomes is [`desired`], a pure function of the object and
//! its token; [`reconcile`] reads the token the lab already has (a
//! running lab keeps its own), applies what `desired` says and writes the
//! status.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::crd::{Lab, LabStatus, Phase};
use crate::{Objects, Request, TOKEN_KEY, WORKER_PORT, render};

/// The field manager the operator applies as.
pub const MANAGER: &str = "turbonet-operator";

/// How often a running lab's status is read again when nothing it owns
/// changed (its StatefulSet's changes wake the operator at once).
const RESYNC: Duration = Duration::from_secs(300);

/// What a `Lab` becomes.
#[derive(Debug, Clone)]
pub struct Desired {
    /// The objects, owned by the `Lab`, in its namespace.
    pub objects: Objects,
    /// The partition's hash.
    pub partition: String,
    /// How many workers.
    pub machines: u32,
}

/// What `lab` becomes with `token`, or why it cannot run (a sentence for
/// its status: the scenario's errors with their lines, a plan refused, a
/// field out of range).
pub fn desired(lab: &Lab, token: &str) -> Result<Desired, String> {
    let name = lab.name_any();
    let origin = format!("Lab {name}");
    let scenario = turbonet_topo::with_lab_name(&lab.spec.scenario, &name).ok_or_else(|| {
        "the scenario has no `[lab] name = \"...\"` (the operator replaces it by the Lab's name)"
            .to_owned()
    })?;
    let parsed = turbonet_topo::parse(&origin, &scenario).map_err(|errors| {
        let said: Vec<String> = errors
            .iter()
            .map(|e| match e.line_col() {
                Some((line, _)) => format!("scenario line {line}: {e}"),
                None => format!("scenario: {e}"),
            })
            .collect();
        said.join("; ")
    })?;
    let plan =
        turbonet_topo::machines::plan(&parsed, lab.spec.machines).map_err(|e| e.to_string())?;
    let mut objects = render(&Request {
        lab: &parsed,
        scenario: &scenario,
        plan: &plan,
        image: &lab.spec.image,
        token,
        port: lab.spec.port.unwrap_or(WORKER_PORT),
    })
    .map_err(|e| e.to_string())?;
    let owner = lab
        .controller_owner_ref(&())
        .ok_or_else(|| "the Lab has no uid yet".to_owned())?;
    for metadata in objects.metadata_mut() {
        metadata.namespace.clone_from(&lab.metadata.namespace);
        metadata.owner_references = Some(vec![owner.clone()]);
    }
    Ok(Desired {
        objects,
        partition: plan.hash,
        machines: plan.machines,
    })
}

/// A lab's status: why it cannot run (`desired` said no), or how many of
/// its workers are ready.
pub fn status(lab: &Lab, desired: &Result<Desired, String>, ready: u32) -> LabStatus {
    let observed_generation = lab.metadata.generation;
    match desired {
        Err(why) => LabStatus {
            phase: Some(Phase::Invalid),
            message: Some(why.clone()),
            observed_generation,
            ..LabStatus::default()
        },
        Ok(d) => {
            let running = ready >= d.machines;
            LabStatus {
                phase: Some(if running {
                    Phase::Running
                } else {
                    Phase::Pending
                }),
                message: (!running).then(|| format!("{ready} of {} workers ready", d.machines)),
                partition: Some(d.partition.clone()),
                ready_workers: ready,
                observed_generation,
            }
        }
    }
}

/// Why a reconcile did not finish (the operator tries again).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or could not be reached.
    #[error("the Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A `Lab` outside any namespace (the CRD makes them namespaced).
    #[error("Lab {0} has no namespace")]
    NoNamespace(String),
    /// No random token could be made.
    #[error("making a token: {0}")]
    Token(String),
}

/// What [`reconcile`] works with.
#[derive(Clone)]
pub struct Context {
    /// The API server.
    pub client: Client,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// The token `secret` holds, if it is one.
fn token_of(secret: &Secret) -> Option<String> {
    if let Some(data) = secret.data.as_ref().and_then(|d| d.get(TOKEN_KEY)) {
        return String::from_utf8(data.0.clone()).ok();
    }
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(TOKEN_KEY))
        .cloned()
}

fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Token(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Applies `object` server-side in `namespace`, as the operator.
async fn apply<K>(client: &Client, namespace: &str, object: &K) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let name = object.meta().name.clone().unwrap_or_default();
    Ok(api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(object),
        )
        .await?)
}

/// Makes a `Lab` what it says: its objects applied, its status written.
pub async fn reconcile(lab: Arc<Lab>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = lab.name_any();
    let namespace = lab
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let client = &ctx.client;
    // A lab keeps its token: its workers hold it.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let token = match secrets
        .get_opt(&format!("{}-token", crate::name(&name)))
        .await?
        .as_ref()
        .and_then(token_of)
    {
        Some(token) => token,
        None => new_token()?,
    };
    let desired = desired(&lab, &token);
    let mut ready = 0;
    if let Ok(d) = &desired {
        let o = &d.objects;
        apply::<ConfigMap>(client, &namespace, &o.config_map).await?;
        apply::<Secret>(client, &namespace, &o.secret).await?;
        apply::<Service>(client, &namespace, &o.service).await?;
        let set = apply::<StatefulSet>(client, &namespace, &o.stateful_set).await?;
        apply::<PodDisruptionBudget>(client, &namespace, &o.budget).await?;
        ready = set
            .status
            .and_then(|s| s.ready_replicas)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(0);
    }
    let status = status(&lab, &desired, ready);
    if lab.status.as_ref() != Some(&status) {
        let labs: Api<Lab> = Api::namespaced(client.clone(), &namespace);
        let patch = serde_json::json!({
            "apiVersion": Lab::api_version(&()),
            "kind": Lab::kind(&()),
            "status": status,
        });
        labs.patch_status(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    }
    Ok(match status.phase {
        // Nothing changes an invalid lab but a new spec.
        Some(Phase::Invalid) => Action::await_change(),
        _ => Action::requeue(RESYNC),
    })
}

/// After a failed reconcile: try again in a while.
pub fn error_policy(lab: Arc<Lab>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(lab = %lab.name_any(), "{error}");
    Action::requeue(Duration::from_secs(10))
}

/// Why the operator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No async runtime could be made.
    #[error("starting: {0}")]
    Runtime(String),
    /// Neither a pod's ServiceAccount nor a kubeconfig says which cluster.
    #[error(
        "no cluster to talk to: {0} (in a pod, its ServiceAccount is used; elsewhere KUBECONFIG or ~/.kube/config)"
    )]
    NoCluster(String),
    /// `Lab`s cannot be listed: the CRD is not installed, or the operator
    /// may not read them.
    #[error(
        "cannot list Lab objects in namespace {namespace}: {source} (is the CRD installed? \
         `turbonet kube install` writes it with the operator's objects)"
    )]
    NoLabs {
        /// The namespace watched.
        namespace: String,
        /// What the API server said.
        source: kube::Error,
    },
}

/// Runs the operator over the `Lab`s of `namespace` until SIGTERM or
/// Ctrl-C; `reconciled` is told of each reconcile.
pub async fn run(
    client: Client,
    namespace: &str,
    mut reconciled: impl FnMut(&str, Result<(), String>),
) -> Result<(), StartError> {
    let labs: Api<Lab> = Api::namespaced(client.clone(), namespace);
    labs.list(&ListParams::default().limit(1))
        .await
        .map_err(|source| StartError::NoLabs {
            namespace: namespace.to_owned(),
            source,
        })?;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let context = Arc::new(Context { client });
    Controller::new(labs, watcher::Config::default())
        .owns(
            sets,
            watcher::Config::default().labels("app.kubernetes.io/managed-by=turbonet"),
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            match result {
                Ok((lab, _)) => reconciled(&lab.name, Ok(())),
                Err(e) => reconciled("", Err(e.to_string())),
            }
            futures::future::ready(())
        })
        .await;
    Ok(())
}

/// `turbonet kube operator`: connects to the cluster (in a pod, its
/// ServiceAccount; elsewhere the kubeconfig) and runs the operator over
/// `namespace` (default: the client's own namespace) until SIGTERM or
/// Ctrl-C.
pub fn main(namespace: Option<&str>) -> Result<(), StartError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    runtime.block_on(async {
        let client = Client::try_default()
            .await
            .map_err(|e| StartError::NoCluster(e.to_string()))?;
        let namespace =
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
        tracing::info!(%namespace, "watching Lab objects");
        run(client, &namespace, |lab, result| match result {
            Ok(()) => tracing::info!(%lab, "reconciled"),
            Err(e) => tracing::warn!("{e}"),
        })
        .await
    })
}
