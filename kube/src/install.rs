//! The operator's own objects (`turbonet kube install`): the `Lab` CRD, and
//! in one namespace the operator's Deployment with just the rights it
//! needs there.
//!
//! A `Lab` runs privileged workers on the cluster's machines, so whoever
//! may create one may do what a privileged pod does. The operator is
//! therefore bounded to one namespace: it watches `Lab`s there only, and
//! its Role grants it nothing elsewhere; who may create `Lab`s (or pods) in
//! that namespace is the cluster admin's to grant. The namespace is
//! labelled for Pod Security's `privileged` level (the workers need it);
//! the operator's own pod runs as nobody, with no capabilities and a
//! read-only root.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, Namespace, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::Error;

/// The operator's name: its Deployment, ServiceAccount, Role and binding.
pub const NAME: &str = "turbonet-operator";

/// The namespace the operator runs in and watches unless told otherwise.
pub const NAMESPACE: &str = "turbonet";

/// The operator's objects, in the order to apply them.
#[derive(Debug, Clone, PartialEq)]
pub struct Install {
    /// The `Lab` CRD (cluster-wide: a CRD always is).
    pub definition: CustomResourceDefinition,
    /// The namespace, allowed privileged pods.
    pub namespace: Namespace,
    /// Who the operator is.
    pub account: ServiceAccount,
    /// What it may do in the namespace.
    pub role: Role,
    /// The two joined.
    pub binding: RoleBinding,
    /// The operator.
    pub deployment: Deployment,
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "turbonet".to_owned()),
        (
            "app.kubernetes.io/component".to_owned(),
            "operator".to_owned(),
        ),
    ])
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|&r| r.to_owned()).collect()),
        verbs: verbs.iter().map(|&v| v.to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The operator's objects, the operator running `image` in `namespace`.
pub fn install(image: &str, namespace: &str) -> Result<Install, Error> {
    if image.trim().is_empty() {
        return Err(Error::NoImage);
    }
    if !image.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::BadImage(image.to_owned()));
    }
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    };
    let mut definition = crate::crd::definition();
    definition.metadata.labels = Some(labels());
    let namespace_object = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (
                    "pod-security.kubernetes.io/enforce".to_owned(),
                    "privileged".to_owned(),
                ),
                ("app.kubernetes.io/name".to_owned(), "turbonet".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let read_write = ["get", "list", "watch", "create", "patch", "update"];
    let role = Role {
        metadata: meta(NAME),
        rules: Some(vec![
            rule("turbonet.dev", &["labs"], &["get", "list", "watch"]),
            rule(
                "turbonet.dev",
                &["labs/status"],
                &["get", "patch", "update"],
            ),
            rule("", &["configmaps", "secrets", "services"], &read_write),
            rule("apps", &["statefulsets"], &read_write),
            rule("policy", &["poddisruptionbudgets"], &read_write),
        ]),
    };
    let binding = RoleBinding {
        metadata: meta(NAME),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: NAME.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: NAME.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    };
    let deployment = Deployment {
        metadata: meta(NAME),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            // Never two operators at once.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(labels()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(operator_pod(image, namespace)),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    Ok(Install {
        definition,
        namespace: namespace_object,
        account: ServiceAccount {
            metadata: meta(NAME),
            ..ServiceAccount::default()
        },
        role,
        binding,
        deployment,
    })
}

/// The operator's pod: unprivileged, its token the ServiceAccount's.
fn operator_pod(image: &str, namespace: &str) -> PodSpec {
    PodSpec {
        service_account_name: Some(NAME.to_owned()),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65534),
            run_as_group: Some(65534),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![Container {
            name: "operator".to_owned(),
            image: Some(image.to_owned()),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(vec!["turbonet".to_owned(), "kube".to_owned()]),
            args: Some(vec![
                "operator".to_owned(),
                "--namespace".to_owned(),
                namespace.to_owned(),
            ]),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".to_owned()]),
                    ..Capabilities::default()
                }),
                ..SecurityContext::default()
            }),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), Quantity("10m".to_owned())),
                    ("memory".to_owned(), Quantity("32Mi".to_owned())),
                ])),
                limits: Some(BTreeMap::from([(
                    "memory".to_owned(),
                    Quantity("256Mi".to_owned()),
                )])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

impl Install {
    /// The objects as one YAML stream, in the order to apply them.
    pub fn to_yaml(&self) -> String {
        let namespace = self.namespace.metadata.name.as_deref().unwrap_or(NAMESPACE);
        let mut out = format!(
            "# turbonet's Lab operator, watching namespace {namespace}:\n\
             # kubectl apply -f THIS; then `kubectl apply -n {namespace} -f LAB.yaml` (kind: Lab)\n"
        );
        for document in [
            crate::yaml(&self.definition),
            crate::yaml(&self.namespace),
            crate::yaml(&self.account),
            crate::yaml(&self.role),
            crate::yaml(&self.binding),
            crate::yaml(&self.deployment),
        ] {
            out.push_str("---\n");
            out.push_str(&document);
        }
        out
    }
}
