//! `turbonet kube selftest`: can this cluster run turbonet labs? A fat-tree
//! k=4 over two machines, as `turbonet kube render` writes it, applied
//! under a name of its own; its workers scheduled on two machines, started,
//! the lab's `check` run in worker 0 (every host pair of both machines,
//! across the cut links' VXLAN tunnels), then everything deleted and
//! waited for. What only a real cluster shows: the workers' DNS names, the
//! underlay's MTU between machines, scheduling by anti-affinity, the image
//! pulled, privileged `hostNetwork` pods admitted.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{AttachParams, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde::Serialize;
use tokio::io::AsyncReadExt;

use crate::{Objects, Request, WORKER_PORT, render};

/// The lab the self-test runs: a k=4 fat-tree, static routes, over two
/// machines (its `[lab] name` is replaced by the test's own).
pub const SCENARIO: &str = r#"# turbonet kube selftest: a k=4 fat-tree over two machines.
[lab]
name = "selftest"
seed = 1

[topology]
kind = "fat-tree"
k = 4

[routing]
mode = "static"

[links.default]
mtu = 1500
"#;

/// Machines the self-test spans.
pub const MACHINES: u32 = 2;

/// The self-test's objects for lab `name` (`selftest-XXXX`), and its
/// partition's hash.
pub fn objects(
    name: &str,
    image: &str,
    token: &str,
    port: u16,
) -> Result<(Objects, String), String> {
    let scenario = turbonet_topo::with_lab_name(SCENARIO, name).expect("SCENARIO names its lab");
    let lab =
        turbonet_topo::parse("selftest", &scenario).map_err(|e| format!("lab {name}: {e}"))?;
    let plan = turbonet_topo::machines::plan(&lab, MACHINES).map_err(|e| e.to_string())?;
    let objects = render(&Request {
        lab: &lab,
        scenario: &scenario,
        plan: &plan,
        image,
        token,
        port,
    })
    .map_err(|e| e.to_string())?;
    Ok((objects, plan.hash))
}

/// What to test with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The workers' image.
    pub image: String,
    /// Where to run the lab.
    pub namespace: String,
    /// The lab's name (`selftest-` and a few random characters, so two
    /// self-tests never meet).
    pub lab: String,
    /// The workers' token.
    pub token: String,
    /// The workers' port on each machine.
    pub port: u16,
    /// How long each step may take.
    pub timeout: Duration,
    /// Leave the lab running (to look at it); delete it by its label.
    pub keep: bool,
}

impl Options {
    /// Options with the defaults: port 7789, 300 s a step, deleted after.
    pub fn new(image: &str, namespace: &str, lab: &str, token: &str) -> Self {
        Self {
            image: image.to_owned(),
            namespace: namespace.to_owned(),
            lab: lab.to_owned(),
            token: token.to_owned(),
            port: WORKER_PORT,
            timeout: Duration::from_secs(300),
            keep: false,
        }
    }
}

/// One step's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// What was tested.
    pub step: &'static str,
    /// Whether it held.
    pub ok: bool,
    /// How long it took.
    pub seconds: f64,
    /// What was seen, or why it failed.
    pub detail: String,
}

/// The self-test's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The lab it ran.
    pub lab: String,
    /// In which namespace.
    pub namespace: String,
    /// Every step taken, in order; it stops at the first that fails (but
    /// for `down`, always taken unless asked to keep the lab).
    pub steps: Vec<Step>,
}

impl Report {
    /// Whether every step held.
    pub fn ok(&self) -> bool {
        self.steps.iter().all(|s| s.ok)
    }
}

/// Runs the self-test; `progress` is told what it waits for as it goes.
pub async fn run(client: Client, options: &Options, mut progress: impl FnMut(&str)) -> Report {
    let mut report = Report {
        lab: options.lab.clone(),
        namespace: options.namespace.clone(),
        steps: Vec::new(),
    };
    let test = Test {
        client,
        options,
        pods: (0..MACHINES)
            .map(|i| format!("{}-{i}", crate::name(&options.lab)))
            .collect(),
    };
    let mut applied = false;
    let steps: [&'static str; 4] = ["apply", "schedule", "start", "check"];
    for step in steps {
        progress(&format!("{step}: {}", what(step)));
        let start = Instant::now();
        let result = async {
            match step {
                "apply" => test.apply().await,
                "schedule" => test.scheduled().await,
                "start" => test.started().await,
                _ => test.check(&mut progress).await,
            }
        };
        // Interrupted, the lab is still taken down.
        let result = tokio::select! {
            result = result => result,
            _ = tokio::signal::ctrl_c() => Err("interrupted".to_owned()),
        };
        // Applying may have made some objects before it failed.
        applied |= step == "apply";
        let ok = result.is_ok();
        report.steps.push(Step {
            step,
            ok,
            seconds: start.elapsed().as_secs_f64(),
            detail: result.unwrap_or_else(|e| e),
        });
        if !ok {
            break;
        }
    }
    if applied && !options.keep {
        progress("down: deleting the lab and waiting for its workers to take their parts down");
        let start = Instant::now();
        let result = test.down().await;
        report.steps.push(Step {
            step: "down",
            ok: result.is_ok(),
            seconds: start.elapsed().as_secs_f64(),
            detail: result.unwrap_or_else(|e| e),
        });
    }
    report
}

fn what(step: &str) -> &'static str {
    match step {
        "apply" => "the lab's objects",
        "schedule" => "its two workers placed on two machines",
        "start" => "the workers' containers running",
        _ => "every host pair of the lab answering, across both machines",
    }
}

struct Test<'a> {
    client: Client,
    options: &'a Options,
    pods: Vec<String>,
}

impl Test<'_> {
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.options.namespace)
    }

    fn selector(&self) -> String {
        format!("app.kubernetes.io/instance={}", self.options.lab)
    }

    async fn apply(&self) -> Result<String, String> {
        let o = self.options;
        let (objects, hash) = objects(&o.lab, &o.image, &o.token, o.port)?;
        let params = PatchParams::apply("turbonet-selftest").force();
        let said = |e: kube::Error| e.to_string();
        macro_rules! apply {
            ($kind:ty, $object:expr) => {{
                let object = $object;
                let name = object.metadata.name.clone().unwrap_or_default();
                self.api::<$kind>()
                    .patch(&name, &params, &Patch::Apply(object))
                    .await
                    .map_err(|e| format!("applying {} {name}: {}", stringify!($kind), said(e)))?;
            }};
        }
        apply!(ConfigMap, &objects.config_map);
        apply!(Secret, &objects.secret);
        apply!(Service, &objects.service);
        apply!(StatefulSet, &objects.stateful_set);
        apply!(PodDisruptionBudget, &objects.budget);
        Ok(format!(
            "5 objects in namespace {} (partition {hash})",
            o.namespace
        ))
    }

    /// Deletes `name` of kind `K`, and what it owns; gone already is done.
    async fn delete<K>(&self, name: &str) -> Result<(), String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        match self
            .api::<K>()
            .delete(name, &DeleteParams::foreground())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(format!("deleting {} {name}: {e}", K::kind(&()))),
        }
    }

    /// Every worker's pod, as it is now.
    async fn pods(&self) -> Result<Vec<Option<Pod>>, String> {
        let api = self.api::<Pod>();
        let mut pods = Vec::new();
        for name in &self.pods {
            pods.push(api.get_opt(name).await.map_err(|e| e.to_string())?);
        }
        Ok(pods)
    }

    /// Waits until `done` says yes of the pods (`Ok(Some(detail))`), or no
    /// for good (`Err`).
    async fn until(
        &self,
        waiting_for: &str,
        mut done: impl FnMut(&[Option<Pod>]) -> Result<Option<String>, String>,
    ) -> Result<String, String> {
        let deadline = Instant::now() + self.options.timeout;
        loop {
            let pods = self.pods().await?;
            if let Some(detail) = done(&pods)? {
                return Ok(detail);
            }
            if Instant::now() >= deadline {
                let seen: Vec<String> = self
                    .pods
                    .iter()
                    .zip(&pods)
                    .map(|(name, pod)| format!("{name}: {}", describe(pod.as_ref())))
                    .collect();
                return Err(format!(
                    "{waiting_for} not within {} s ({})",
                    self.options.timeout.as_secs(),
                    seen.join("; ")
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    async fn scheduled(&self) -> Result<String, String> {
        self.until("both workers scheduled", |pods| {
            let nodes: Option<Vec<&str>> = pods
                .iter()
                .map(|p| p.as_ref()?.spec.as_ref()?.node_name.as_deref())
                .collect();
            let Some(nodes) = nodes else {
                return Ok(None);
            };
            if nodes.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!(
                    "both workers on machine {}: the anti-affinity was not honoured",
                    nodes[0]
                ));
            }
            Ok(Some(format!("on machines {}", nodes.join(" and "))))
        })
        .await
    }

    async fn started(&self) -> Result<String, String> {
        self.until("both workers running", |pods| {
            for pod in pods.iter().flatten() {
                if let Some(why) = stuck(pod) {
                    return Err(why);
                }
            }
            let running = pods.iter().all(|p| {
                p.as_ref()
                    .and_then(|p| p.status.as_ref()?.phase.as_deref())
                    .is_some_and(|phase| phase == "Running")
            });
            Ok(running.then(|| "both workers' containers running".to_owned()))
        })
        .await
    }

    /// `turbonet check --lab LAB --json` in worker 0, again until the lab
    /// runs and every probe is answered.
    async fn check(&self, progress: &mut impl FnMut(&str)) -> Result<String, String> {
        let pods = self.api::<Pod>();
        let command = ["turbonet", "check", "--lab", &self.options.lab, "--json"];
        let deadline = Instant::now() + self.options.timeout;
        let mut last = String::new();
        loop {
            let (said, exited_ok) = exec(&pods, &self.pods[0], &command).await?;
            if let Some(verdict) = verdict(&said) {
                if exited_ok && verdict.ok {
                    return Ok(verdict.detail);
                }
                if verdict.detail != last {
                    progress(&format!("check: {}", verdict.detail));
                }
                last = verdict.detail;
            } else {
                last = said.lines().last().unwrap_or("").trim().to_owned();
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the lab did not answer within {} s: {last}",
                    self.options.timeout.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    async fn down(&self) -> Result<String, String> {
        let o = self.options;
        let name = crate::name(&o.lab);
        let errors: Vec<String> = [
            self.delete::<StatefulSet>(&name).await,
            self.delete::<PodDisruptionBudget>(&name).await,
            self.delete::<Service>(&name).await,
            self.delete::<ConfigMap>(&format!("{name}-scenario")).await,
            self.delete::<Secret>(&format!("{name}-token")).await,
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect();
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        // The workers take their parts down in their grace period.
        let pods = self.api::<Pod>();
        let deadline = Instant::now() + self.options.timeout;
        let list = ListParams::default().labels(&self.selector());
        loop {
            let left = pods
                .list(&list)
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if left == 0 {
                return Ok("every object deleted, both workers gone".to_owned());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{left} worker pod(s) still there after {} s (kubectl get pods -n {} -l {})",
                    self.options.timeout.as_secs(),
                    o.namespace,
                    self.selector()
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}

/// Runs `command` in `pod`'s worker container: what it wrote, and
/// whether it exited 0.
async fn exec(pods: &Api<Pod>, pod: &str, command: &[&str]) -> Result<(String, bool), String> {
    let params = AttachParams::default()
        .container("worker")
        .stdout(true)
        .stderr(true)
        .stdin(false);
    let mut attached = pods
        .exec(pod, command.iter().copied(), &params)
        .await
        .map_err(|e| format!("running {} in {pod}: {e}", command.join(" ")))?;
    let mut out = String::new();
    let mut err = String::new();
    let status = attached.take_status();
    if let Some(mut stdout) = attached.stdout() {
        let _ = stdout.read_to_string(&mut out).await;
    }
    if let Some(mut stderr) = attached.stderr() {
        let _ = stderr.read_to_string(&mut err).await;
    }
    let ok = match status {
        Some(status) => status
            .await
            .is_some_and(|s| s.status.as_deref() == Some("Success")),
        None => false,
    };
    let _ = attached.join().await;
    Ok((out + &err, ok))
}

/// What `turbonet check --json` said, if it said it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Every probe answered, from every machine.
    pub ok: bool,
    /// In a line.
    pub detail: String,
}

/// Reads `turbonet check --json`'s output.
pub fn verdict(said: &str) -> Option<Verdict> {
    let start = said.find('{')?;
    let value: serde_json::Value = serde_json::from_str(said[start..].trim()).ok()?;
    let probes = value.get("probes")?.as_u64()?;
    let reachable = value.get("reachable")?.as_u64()?;
    let hosts = value.get("hosts")?.as_u64()?;
    let missing: Vec<&str> = value
        .get("missing")
        .and_then(|m| m.as_array())
        .map(|m| m.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut detail = format!("{reachable}/{probes} probes answered between {hosts} hosts");
    if !missing.is_empty() {
        detail.push_str(&format!("; not checked from: {}", missing.join("; ")));
    }
    Some(Verdict {
        ok: probes > 0 && reachable == probes && missing.is_empty(),
        detail,
    })
}

/// Why a pod will not start by itself, if it will not.
fn stuck(pod: &Pod) -> Option<String> {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() == Some("Failed") {
        return Some(format!(
            "{name} failed: {}",
            status.message.as_deref().unwrap_or("no reason given")
        ));
    }
    for container in status.container_statuses.iter().flatten() {
        let waiting = container.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref().unwrap_or("");
        if matches!(
            reason,
            "ErrImagePull"
                | "ImagePullBackOff"
                | "InvalidImageName"
                | "CrashLoopBackOff"
                | "CreateContainerConfigError"
                | "CreateContainerError"
        ) {
            return Some(format!(
                "{name}: {reason}: {}",
                waiting.message.as_deref().unwrap_or("")
            ));
        }
    }
    None
}

/// A pod in a few words, for a timeout's message.
fn describe(pod: Option<&Pod>) -> String {
    let Some(pod) = pod else {
        return "no pod".to_owned();
    };
    let Some(status) = &pod.status else {
        return "no status".to_owned();
    };
    let mut said = status.phase.clone().unwrap_or_else(|| "?".to_owned());
    if let Some(condition) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    {
        said.push_str(&format!(
            ", unschedulable: {}",
            condition.message.as_deref().unwrap_or("")
        ));
    }
    said
}

/// `turbonet kube selftest`: connects to the cluster the kubeconfig names
/// and runs the self-test in `namespace` (default: the kubeconfig
/// context's); `options` is made from the namespace.
pub fn main(
    namespace: Option<&str>,
    options: impl FnOnce(&str) -> Options,
    progress: impl FnMut(&str),
) -> Result<Report, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting: {e}"))?;
    runtime.block_on(async {
        let client = Client::try_default().await.map_err(|e| {
            format!("no cluster to test: {e} (KUBECONFIG or ~/.kube/config names one)")
        })?;
        let namespace =
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
        let options = options(&namespace);
        Ok(run(client, &options, progress).await)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_is_passed_when_every_probe_of_every_machine_is_answered() {
        // As `turbonet check --json` prints it, after a note on stderr.
        let all = r#"note: probing from 16 hosts
{
  "lab": "selftest-1a2b",
  "hosts": 16,
  "probes": 240,
  "reachable": 240,
  "sample": null,
  "seconds": 0.9,
  "failures": []
}"#;
        assert_eq!(
            verdict(all),
            Some(Verdict {
                ok: true,
                detail: "240/240 probes answered between 16 hosts".to_owned()
            })
        );
        let short = all.replace("\"reachable\": 240", "\"reachable\": 200");
        assert!(!verdict(&short).unwrap().ok);
        let one_machine = all.replace(
            "\"failures\": []",
            "\"failures\": [], \"missing\": [\"machine 1: reaching the worker: refused\"]",
        );
        let said = verdict(&one_machine).unwrap();
        assert!(!said.ok);
        assert!(
            said.detail
                .ends_with("not checked from: machine 1: reaching the worker: refused")
        );
        // No lab yet: an error, not a verdict.
        assert_eq!(verdict("error: no lab named selftest-1a2b is up"), None);
    }

    #[test]
    fn a_pod_that_cannot_start_says_why() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "turbonet-selftest-1a2b-0"},
            "status": {"phase": "Pending", "containerStatuses": [{
                "name": "worker", "image": "nope", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff",
                                      "message": "Back-off pulling image \"nope\""}}}]}
        }))
        .unwrap();
        assert_eq!(
            stuck(&pod).as_deref(),
            Some("turbonet-selftest-1a2b-0: ImagePullBackOff: Back-off pulling image \"nope\"")
        );
        let unschedulable: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "turbonet-selftest-1a2b-1"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False",
                "message": "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules"}]}
        }))
        .unwrap();
        assert_eq!(stuck(&unschedulable), None);
        assert_eq!(
            describe(Some(&unschedulable)),
            "Pending, unschedulable: 0/3 nodes are available: 1 node(s) didn't match pod \
             anti-affinity rules"
        );
    }
}
