//! The `Lab` custom resource: a lab over a cluster's machines as one
//! Kubernetes object (`kubectl apply -f lab.yaml`), which the operator
//! ([`crate::operator`]) turns into the objects `turbonet kube render`
//! writes. Its schema is derived from these types, so the CRD that
//! `turbonet kube install` writes and what the operator reads cannot drift
//! apart.

use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// A lab over `machines` machines of the cluster: one turbonet worker on
/// each, worker 0 coordinating. The lab is named after this object (the
/// scenario's `[lab] name` is replaced by it), so two `Lab`s of a
/// namespace never share a name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "turbonet.dev",
    version = "v1alpha1",
    kind = "Lab",
    doc = "A turbonet lab over several machines of the cluster, run by turbonet's operator",
    namespaced,
    status = "LabStatus",
    shortname = "tlab",
    category = "turbonet",
    printcolumn = r#"{"name":"Machines","type":"integer","jsonPath":".spec.machines"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyWorkers"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Partition","type":"string","jsonPath":".status.partition","priority":1}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabSpec {
    /// The scenario, as `turbonet up` reads it (TOML, at most 1,000,000
    /// bytes). Its `[lab] name` is replaced by this object's name.
    #[schemars(length(min = 1, max = 1_000_000))]
    pub scenario: String,
    /// How many machines the lab spans, one worker on each
    /// (`turbonet plan --machines M` shows what each runs).
    #[schemars(range(min = 1, max = 1024))]
    pub machines: u32,
    /// The workers' container image: turbonet, and FRR or BIRD if the lab
    /// runs them.
    #[schemars(length(min = 1))]
    pub image: String,
    /// The port the workers listen on for each other, on each machine's
    /// own network (7789 unless set: labs whose workers share machines
    /// each need their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
}

/// What the operator last saw of a lab.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabStatus {
    /// `Invalid` (the spec cannot be run: `message` says why), `Pending`
    /// (workers not all ready), `Running` (every worker's part is up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Why the lab is invalid, or what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The partition's hash (`turbonet plan --machines M` prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Workers whose pods are ready.
    #[serde(default)]
    pub ready_workers: u32,
    /// The spec's generation this status is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A lab's phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// The spec cannot be run; `message` says why.
    Invalid,
    /// The objects are applied; not every worker is ready.
    Pending,
    /// Every worker is ready.
    Running,
}

/// The `CustomResourceDefinition` of [`Lab`], as `kubectl apply` takes it.
pub fn definition() -> CustomResourceDefinition {
    Lab::crd()
}

impl Lab {
    /// The object as YAML, after a comment that says how to run it.
    pub fn to_yaml(&self) -> String {
        format!(
            "# turbonet lab {} over {} machine{}: kubectl apply -f THIS (in the namespace \
             turbonet's operator watches)\n---\n{}",
            self.metadata.name.as_deref().unwrap_or("?"),
            self.spec.machines,
            if self.spec.machines == 1 { "" } else { "s" },
            crate::yaml(self),
        )
    }
}
