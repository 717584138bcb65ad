//! Real routing daemons as a switch's agent (`agent = "frr"` or `"bird"`).

use turbonet_topo::Agent;

/// Why switches with agent `kind` cannot run on this machine, if they
/// cannot.
pub fn missing(kind: Agent) -> Option<String> {
    match kind {
        Agent::Builtin => None,
        Agent::Frr | Agent::Bird => Some(format!(
            "agent \"{kind}\" is not available in this build; use agent = \"builtin\""
        )),
    }
}
