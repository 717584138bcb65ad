//! The `p4rt` target: a lab's fabric on the programmable switches its
//! `[p4rt]` section names, each reached over P4Runtime at its address.
//! Hosts are whatever is cabled to the host ports (servers); turbonet
//! creates nothing in this machine's kernel for them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use p4runtime_proto::p4::config::v1::P4Info;
use turbonet_topo::mapper::{self, MapConfig, Mapping, PhysicalSwitch};
use turbonet_topo::{Lab, P4rtConfig, P4rtDevice};

/// The BMv2 program that serves P4Runtime.
pub const BMV2: &str = "simple_switch_grpc";

/// The lab's `[p4rt]` section (present on target `p4rt`).
pub fn config(lab: &Lab) -> Result<&P4rtConfig> {
    lab.p4rt
        .as_ref()
        .ok_or_else(|| anyhow!("lab {} has no [p4rt] section", lab.name))
}

/// The `[p4rt]` switches as the mapper sees them.
pub fn map_config(p4rt: &P4rtConfig) -> MapConfig {
    MapConfig {
        switches: p4rt
            .switches
            .iter()
            .map(|s| PhysicalSwitch::new(&s.name, s.ports, s.speed))
            .collect(),
        queues: p4rt.queues,
        default_rate: mapper::DEFAULT_RATE,
        untagged_hosts: false,
    }
}

/// Maps the lab onto its switches, or says what is short.
pub fn map(lab: &Lab) -> Result<Mapping, String> {
    let Some(p4rt) = &lab.p4rt else {
        return Err("target \"p4rt\" needs a [p4rt] section".to_owned());
    };
    mapper::map(&lab.fabric, &map_config(p4rt)).map_err(|e| match e {
        // The mapper's advice names `plan`'s flags: in a scenario they are
        // more `[[p4rt.switch]]` or `[p4rt] queues`.
        mapper::MapError::DoesNotFit(_) => {
            format!("{e} (in the scenario: more [[p4rt.switch]] entries, or [p4rt] queues)")
        }
        e => e.to_string(),
    })
}

/// Where `simple_switch_grpc` is on `PATH`, if it is.
pub fn find_bmv2() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(BMV2))
            .find(|p| p.is_file())
    })
}

/// Why the lab cannot run here, if it cannot: a switch that asks for BMv2
/// on a machine without it. (BMv2 started by turbonet is not wired to
/// hosts yet either: say so instead of starting a switch no frame reaches.)
pub fn unsupported(lab: &Lab) -> Option<String> {
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        return Some(
            "routing mode \"bgp\" runs on targets \"netns\" and \"soft\"; on \"p4rt\" the \
             agents would need a control-plane host wired to each switch's CPU port: use mode \
             \"static\" or \"controller\""
                .to_owned(),
        );
    }
    let p4rt = lab.p4rt.as_ref()?;
    let bmv2 = p4rt
        .switches
        .iter()
        .find(|s| s.device == P4rtDevice::Bmv2)?;
    Some(match find_bmv2() {
        None => format!(
            "switch {} asks for BMv2 (`bmv2 = true`), but {BMV2} is not on PATH; install \
             BMv2 (p4lang/behavioral-model, built with --with-pi), or start it elsewhere and \
             give `address = \"HOST:PORT\"` instead",
            bmv2.name
        ),
        Some(path) => format!(
            "switch {}: turbonet does not start {} itself yet; start it with its ports on \
             your interfaces (`{BMV2} --device-id {} -i 1@IFACE ... -- --grpc-server-addr \
             127.0.0.1:9559 --cpu-port 255`) and give `address = \"127.0.0.1:9559\"`",
            bmv2.name,
            path.display(),
            bmv2.device_id
        ),
    })
}

/// A path of the scenario, relative to the scenario file's directory.
fn relative_to(scenario: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        return path.to_owned();
    }
    scenario
        .parent()
        .map_or_else(|| path.to_owned(), |dir| dir.join(path))
}

/// The pipeline the switches get: the P4Info (`[p4rt] p4info`, default
/// turbonet's own) and the compiled artifact (`device_config`).
pub fn pipeline(lab: &Lab, scenario: &Path) -> Result<(P4Info, Vec<u8>)> {
    let p4rt = config(lab)?;
    let p4info = match &p4rt.p4info {
        Some(file) => {
            let path = relative_to(scenario, file);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading the P4Info {}", path.display()))?;
            turbonet_softswitch::parse_p4info(&text)
                .with_context(|| format!("{}: not a text-format P4Info", path.display()))?
        }
        None => turbonet_softswitch::turbonet_p4info(),
    };
    let device_config = match &p4rt.device_config {
        Some(file) => {
            let path = relative_to(scenario, file);
            std::fs::read(&path)
                .with_context(|| format!("reading the device config {}", path.display()))?
        }
        None => Vec::new(),
    };
    Ok((p4info, device_config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_relative_to_the_scenario() {
        let scenario = Path::new("/labs/k4/k4.toml");
        assert_eq!(
            relative_to(scenario, "build/t.json"),
            Path::new("/labs/k4/build/t.json")
        );
        assert_eq!(
            relative_to(scenario, "/opt/t.json"),
            Path::new("/opt/t.json")
        );
    }
}
