//! turbonet-topo: scenario files to validated fabric models.
//!
//! Pure: no I/O. [`parse`] turns the text of a scenario file into a [`Lab`]
//! (nodes, links, addresses, ASNs, prefixes) or into located diagnostics.

pub mod model;
pub mod units;

pub use model::*;
