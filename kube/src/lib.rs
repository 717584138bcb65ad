//! turbonet-kube: a lab over a Kubernetes cluster, as the plain objects
//! `kubectl apply` takes ([`render`]): the scenario in a ConfigMap, the
//! workers' shared token in a Secret, a headless Service by which they
//! find worker 0 (the coordinator), a StatefulSet of M privileged
//! `hostNetwork` workers (one a machine: the lab's namespaces and links are
//! the machine's kernel's), and a PodDisruptionBudget that keeps a drain
//! from taking a worker away while the lab runs. Typed with `k8s-openapi`,
//! written as YAML. Rendering is pure: the caller reads the scenario,
//! plans it and makes the token.
//!
//! Then the `Lab` custom resource ([`crd`]) and its operator
//! ([`operator`]), which renders the same objects for each `Lab` in a
//! namespace and applies them; the operator's own objects ([`install`]);
//! and [`selftest`], which runs a small lab on a user's cluster to show it
//! can run turbonet. Those two talk to the cluster's API server (kube-rs);
//! what they decide is computed by pure functions beside them.

pub mod crd;
pub mod install;
pub mod operator;
pub mod selftest;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, ExecAction, ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Secret, SecretVolumeSource,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use turbonet_topo::Lab;
use turbonet_topo::machines::MachinePlan;

/// The port a lab's workers listen on for each other, on the machine's
/// own network (`hostNetwork`), unless asked otherwise: labs whose
/// workers share machines each take another.
pub const WORKER_PORT: u16 = 7789;

/// The most bytes of scenario a ConfigMap holds (Kubernetes refuses an
/// object over 1 MiB; the rest of the ConfigMap takes a little).
pub const SCENARIO_MAX: usize = 1_000_000;

/// Where a worker's container finds the scenario and the token.
const SCENARIO_DIR: &str = "/etc/turbonet/scenario";
const TOKEN_DIR: &str = "/etc/turbonet/token";
/// The keys of the ConfigMap and the Secret.
const SCENARIO_KEY: &str = "scenario.toml";
const TOKEN_KEY: &str = "token";

/// What to render.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The lab, as read from `scenario`.
    pub lab: &'a Lab,
    /// The scenario's text, as every worker is to read it.
    pub scenario: &'a str,
    /// The lab planned over the machines (their count, the partition's
    /// hash, each machine's kernel memory).
    pub plan: &'a MachinePlan,
    /// The container image: turbonet, and FRR or BIRD if the lab runs
    /// them.
    pub image: &'a str,
    /// The secret the workers present to each other.
    pub token: &'a str,
    /// The port the workers listen on ([`WORKER_PORT`] unless asked).
    pub port: u16,
}

/// Why a lab cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The scenario does not fit a ConfigMap.
    #[error(
        "the scenario is {0} bytes; a ConfigMap holds at most {SCENARIO_MAX} (Kubernetes \
         refuses objects over 1 MiB): shorten it (a topology generator rather than a list of \
         links)"
    )]
    ScenarioTooLarge(usize),
    /// No image was named.
    #[error(
        "no container image: name one with turbonet in it (and FRR or BIRD if the lab runs them)"
    )]
    NoImage,
    /// The image is not an image reference.
    #[error(
        "container image {0:?} is not an image reference: no spaces or control characters \
         (registry/name:tag, or name@sha256:digest)"
    )]
    BadImage(String),
    /// The token is not one a worker can read back.
    #[error("the token must be printable ASCII without spaces, 16 to 256 characters")]
    BadToken,
}

/// The objects of a lab on a cluster, in the order to apply them.
#[derive(Debug, Clone, PartialEq)]
pub struct Objects {
    /// The scenario.
    pub config_map: ConfigMap,
    /// The token.
    pub secret: Secret,
    /// The workers' names (`turbonet-LAB-0.turbonet-LAB` is the
    /// coordinator).
    pub service: Service,
    /// The workers.
    pub stateful_set: StatefulSet,
    /// No voluntary eviction of a worker.
    pub budget: PodDisruptionBudget,
}

/// The name of a lab's objects: `turbonet-LAB` (a lab's name is already a
/// DNS label; the prefix makes it start with a letter, as a Service's must).
pub fn name(lab: &str) -> String {
    format!("turbonet-{lab}")
}

/// The labels every object of lab `lab` carries; the selector takes the
/// first two.
fn labels(lab: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "turbonet".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), lab.to_owned()),
        (
            "app.kubernetes.io/component".to_owned(),
            "worker".to_owned(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "turbonet".to_owned(),
        ),
    ])
}

fn selector(lab: &str) -> BTreeMap<String, String> {
    labels(lab)
        .into_iter()
        .filter(|(k, _)| k == "app.kubernetes.io/name" || k == "app.kubernetes.io/instance")
        .collect()
}

/// The annotation that carries the partition's hash.
const PARTITION: &str = "turbonet.dev/partition";

/// A lab's objects.
pub fn render(r: &Request<'_>) -> Result<Objects, Error> {
    if r.scenario.len() > SCENARIO_MAX {
        return Err(Error::ScenarioTooLarge(r.scenario.len()));
    }
    if r.image.trim().is_empty() {
        return Err(Error::NoImage);
    }
    if !r.image.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::BadImage(r.image.to_owned()));
    }
    if !(16..=256).contains(&r.token.len()) || !r.token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::BadToken);
    }
    let lab = r.lab.name.as_str();
    let name = name(lab);
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels(lab)),
        annotations: Some(BTreeMap::from([(
            PARTITION.to_owned(),
            r.plan.hash.clone(),
        )])),
        ..ObjectMeta::default()
    };
    let config_map = ConfigMap {
        metadata: meta(&format!("{name}-scenario")),
        data: Some(BTreeMap::from([(
            SCENARIO_KEY.to_owned(),
            r.scenario.to_owned(),
        )])),
        ..ConfigMap::default()
    };
    let secret = Secret {
        metadata: meta(&format!("{name}-token")),
        type_: Some("Opaque".to_owned()),
        string_data: Some(BTreeMap::from([(TOKEN_KEY.to_owned(), r.token.to_owned())])),
        ..Secret::default()
    };
    let service = Service {
        metadata: meta(&name),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            // Workers find the coordinator before any of them is ready.
            publish_not_ready_addresses: Some(true),
            selector: Some(selector(lab)),
            ports: Some(vec![ServicePort {
                name: Some("worker".to_owned()),
                port: i32::from(r.port),
                target_port: Some(IntOrString::Int(i32::from(r.port))),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let stateful_set = StatefulSet {
        metadata: meta(&name),
        spec: Some(StatefulSetSpec {
            service_name: Some(name.clone()),
            replicas: Some(i32::try_from(r.plan.machines).unwrap_or(i32::MAX)),
            // Every worker at once: the coordinator waits for them all.
            pod_management_policy: Some("Parallel".to_owned()),
            // A new template must not restart a running lab's workers.
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_owned()),
                ..StatefulSetUpdateStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(selector(lab)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(lab)),
                    annotations: Some(BTreeMap::from([(
                        PARTITION.to_owned(),
                        r.plan.hash.clone(),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod(r, &name)),
            },
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };
    let budget = PodDisruptionBudget {
        metadata: meta(&name),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(0)),
            selector: Some(LabelSelector {
                match_labels: Some(selector(lab)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    };
    Ok(Objects {
        config_map,
        secret,
        service,
        stateful_set,
        budget,
    })
}

/// A worker's pod: on the machine's own network, privileged (it makes
/// namespaces, links and routes in the machine's kernel), one a machine,
/// its index from its ordinal.
fn pod(r: &Request<'_>, name: &str) -> PodSpec {
    let lab = r.lab.name.as_str();
    let port = r.port.to_string();
    let coordinator = format!("{name}-0.{name}:{port}");
    let args = [
        "--index",
        "$(TURBONET_INDEX)",
        "--of",
        &r.plan.machines.to_string(),
        "--coordinator",
        &coordinator,
        "--listen",
        &format!("0.0.0.0:{port}"),
        "--token-file",
        &format!("{TOKEN_DIR}/{TOKEN_KEY}"),
        &format!("{SCENARIO_DIR}/{SCENARIO_KEY}"),
    ]
    .map(str::to_owned)
    .to_vec();
    // What the busiest machine's kernel holds for its part: a request the
    // scheduler places by (the workers' own memory comes on top).
    let memory = r.plan.parts.iter().map(|p| p.memory.0).max().unwrap_or(0);
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    };
    PodSpec {
        host_network: Some(true),
        dns_policy: Some("ClusterFirstWithHostNet".to_owned()),
        // `down` of a large part takes a while.
        termination_grace_period_seconds: Some(300),
        affinity: Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(selector(lab)),
                        ..LabelSelector::default()
                    }),
                    topology_key: "kubernetes.io/hostname".to_owned(),
                    ..PodAffinityTerm::default()
                }]),
                ..PodAntiAffinity::default()
            }),
            ..Affinity::default()
        }),
        containers: vec![Container {
            name: "worker".to_owned(),
            image: Some(r.image.to_owned()),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(vec!["turbonet".to_owned(), "worker".to_owned()]),
            args: Some(args),
            env: Some(vec![EnvVar {
                name: "TURBONET_INDEX".to_owned(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.labels['apps.kubernetes.io/pod-index']".to_owned(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            }]),
            // Ready once this machine's part is built and its daemon
            // answers: the StatefulSet's ready workers are the lab's.
            readiness_probe: Some(Probe {
                exec: Some(ExecAction {
                    command: Some(
                        ["turbonet", "status", "--ready", lab]
                            .map(str::to_owned)
                            .to_vec(),
                    ),
                }),
                period_seconds: Some(5),
                timeout_seconds: Some(10),
                ..Probe::default()
            }),
            ports: Some(vec![ContainerPort {
                name: Some("worker".to_owned()),
                container_port: i32::from(r.port),
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            }]),
            security_context: Some(SecurityContext {
                privileged: Some(true),
                ..SecurityContext::default()
            }),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "memory".to_owned(),
                    Quantity(format!("{}Mi", memory.div_ceil(1 << 20).max(1))),
                )])),
                ..ResourceRequirements::default()
            }),
            volume_mounts: Some(vec![
                mount("scenario", SCENARIO_DIR, true),
                mount("token", TOKEN_DIR, true),
                mount("run", "/run/turbonet", false),
                mount("netns", "/run/netns", false),
            ]),
            ..Container::default()
        }],
        volumes: Some(vec![
            Volume {
                name: "scenario".to_owned(),
                config_map: Some(ConfigMapVolumeSource {
                    name: format!("{name}-scenario"),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "token".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(format!("{name}-token")),
                    default_mode: Some(0o400),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            },
            empty("run"),
            empty("netns"),
        ]),
        ..PodSpec::default()
    }
}

impl Objects {
    /// Every object's metadata, in the order to apply them.
    pub fn metadata_mut(&mut self) -> [&mut ObjectMeta; 5] {
        [
            &mut self.config_map.metadata,
            &mut self.secret.metadata,
            &mut self.service.metadata,
            &mut self.stateful_set.metadata,
            &mut self.budget.metadata,
        ]
    }

    /// The objects as one YAML stream, a document each, in the order to
    /// apply them, after a comment that says what they are.
    pub fn to_yaml(&self, lab: &str, machines: u32, hash: &str) -> String {
        let mut out = format!(
            "# turbonet lab {lab} over {machines} machine{}, partition {hash}:\n\
             # kubectl apply -f THIS; the workers come up as pods {}-0 to {}-{}\n",
            if machines == 1 { "" } else { "s" },
            name(lab),
            name(lab),
            machines.saturating_sub(1),
        );
        let documents = [
            yaml(&self.config_map),
            yaml(&self.secret),
            yaml(&self.service),
            yaml(&self.stateful_set),
            yaml(&self.budget),
        ];
        for document in documents {
            out.push_str("---\n");
            out.push_str(&document);
        }
        out
    }
}

fn yaml<T: serde::Serialize>(object: &T) -> String {
    serde_norway::to_string(object).expect("Kubernetes objects serialise")
}
