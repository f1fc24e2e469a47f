//! Compiles the `.proto` files of `proto/` with protox (no system `protoc`)
//! and generates the prost types, the tonic server trait and the client.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/apache/rocketmq/v2/definition.proto",
        "proto/apache/rocketmq/v2/service.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
