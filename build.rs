//! Generates the gateway's gRPC server from `proto/cuzk/v1/proving.proto`: protox reads the
//! file (no protoc binary needed), tonic-prost-build writes the messages and the service trait.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
