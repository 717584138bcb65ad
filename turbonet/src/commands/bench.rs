//! `turbonet bench`: up and down times, peak memory, and the engine's,
//! BGP's, the soft switch's, the workloads' and the instruments' figures.

use anyhow::Result;
use turbonet_bench as bench;

use crate::cli::BenchArgs;
use crate::progress::Terminal;
use crate::render::table;

/// `turbonet bench`: the benchmark the flags pick, then its report.
pub(crate) fn run(args: BenchArgs) -> Result<()> {
    let which = if args.engine {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let shards = if args.shards.is_empty() {
            let mut k = vec![1, cores];
            k.dedup();
            k
        } else {
            args.shards
        };
        bench::Bench::Engine(bench::engine::Options {
            probes: args.probes,
            loss_frames: args.loss_frames,
            frames: args.frames,
            links: args.links,
            shards: shards.into_iter().map(Some).collect(),
            link_engine: args.link_engine,
            parts: args
                .part
                .iter()
                .filter_map(|p| bench::engine::Part::ALL.into_iter().find(|k| k.name() == p))
                .collect(),
        })
    } else if args.bgp {
        bench::Bench::Bgp {
            density: args.density,
            agents: args.agents,
        }
    } else if args.machines {
        bench::Bench::Machines {
            file: (args.files.first().cloned())
                .unwrap_or_else(|| "scenarios/fat-tree-k8.toml".into()),
            counts: args.counts,
            probes: args.probes.min(2_000),
        }
    } else if args.soft {
        bench::Bench::Soft {
            frames: args.frames,
        }
    } else if args.workloads {
        bench::Bench::Workloads
    } else if args.instruments {
        bench::Bench::Instruments {
            frames: args.frames,
        }
    } else {
        bench::Bench::Up {
            files: args.files,
            runs: args.runs,
            check: args.check.then_some(args.sample),
            routing: args.routing,
        }
    };
    print!("{}", report(&bench::bench(&which, &Terminal::new(false))?));
    Ok(())
}

/// A benchmark's report: its lines and tables, in order.
fn report(report: &turbonet_bench::report::Report) -> String {
    use turbonet_bench::report::Item;
    let mut out = String::new();
    for item in &report.items {
        match item {
            Item::Text(text) => out.push_str(text),
            Item::Table(t) => out.push_str(&table(
                &t.header.iter().map(String::as_str).collect::<Vec<_>>(),
                t.rows.iter().cloned(),
                &t.right,
            )),
        }
        out.push('\n');
    }
    out
}
