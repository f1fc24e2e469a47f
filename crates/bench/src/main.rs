//! `sluice-bench`: parses the flags, starts a tokio runtime and runs the
//! producer or consumer benchmark described in the `bench` library,
//! summarizes the overload experiment, creates a topic, or publishes to a
//! NATS JetStream stream for comparison; reports go to
//! stdout, progress to stderr.

use std::fs;

use anyhow::{Context, Result};
use bench::{
    args::{Args, Command, OverloadReportArgs},
    chart,
    overload::Overload,
    report::Table,
    Report,
};
use clap::Parser;

fn main() -> Result<()> {
    let args = Args::parse();
    match args.command {
        None => produce(&args.produce),
        Some(Command::Produce(p)) => produce(&p),
        Some(Command::Consume(c)) => {
            let config = c.to_config()?;
            let report = runtime()?.block_on(bench::consume::consume(&config))?;
            if c.json {
                println!("{}", report.to_json()?);
            } else {
                print!("{report}");
            }
            Ok(())
        }
        Some(Command::OverloadReport(o)) => overload_report(&o),
        Some(Command::ControllerCommit(c)) => {
            let report =
                runtime()?.block_on(bench::controller_commit::run(&c.controller, c.count))?;
            print!("{report}");
            Ok(())
        }
        Some(Command::Drain(d)) => {
            let config = d.to_config()?;
            for report in runtime()?.block_on(bench::drain::drain(&config))? {
                if d.json {
                    println!("{}", report.to_json()?);
                } else {
                    println!("{report}");
                }
            }
            Ok(())
        }
        Some(Command::NatsPublish(n)) => {
            let config = n.to_config()?;
            let report = runtime()?.block_on(bench::nats::publish(&config))?;
            if n.json {
                println!("{}", report.to_json()?);
            } else {
                print!("{}", Table(&report));
            }
            Ok(())
        }
        Some(Command::CreateTopic(c)) => {
            c.validate()?;
            let timeout = std::time::Duration::from_millis(c.timeout_ms);
            let credentials = c.credentials.credentials()?;
            runtime()?.block_on(bench::route::create_topic(
                &c.broker,
                &c.topic,
                c.queues,
                timeout,
                credentials.as_ref(),
            ))?;
            println!(
                "created topic {} with {} queues on {}",
                c.topic, c.queues, c.broker
            );
            Ok(())
        }
    }
}

fn produce(args: &bench::args::ProduceArgs) -> Result<()> {
    let (config, mode) = args.to_run()?;
    let report = runtime()?.block_on(bench::run::run(&config, mode))?;
    if args.json {
        println!("{}", report.to_json()?);
    } else {
        print!("{}", Table(&report));
    }
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-worker")
        .build()
        .context("start the tokio runtime")
}

fn read_report(path: &std::path::Path) -> Result<Report> {
    let text = fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Report::from_json(&text)
        .with_context(|| format!("{} is not a sluice-bench --json report", path.display()))
}

fn overload_report(args: &OverloadReportArgs) -> Result<()> {
    let capacity = read_report(&args.capacity)?;
    let runs = args
        .labelled_runs()?
        .into_iter()
        .map(|(label, path)| Ok((label, read_report(&path)?)))
        .collect::<Result<Vec<_>>>()?;
    let summary = Overload::new(args.bound.clone(), args.limit_ms, capacity, runs)?;
    print!("{summary}");
    fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let json = args.out.join("overload.json");
    fs::write(&json, summary.to_json()?).with_context(|| format!("write {}", json.display()))?;
    let png = args.out.join("overload.png");
    let text = chart::draw(&summary, &png)?;
    println!();
    println!("wrote {}", json.display());
    match text {
        chart::Text::Drawn(font) => println!("wrote {} (text in {font})", png.display()),
        chart::Text::NoFont => println!(
            "wrote {} without text: no font found (set {} to a .ttf file)",
            png.display(),
            chart::FONT_ENV
        ),
    }
    Ok(())
}
