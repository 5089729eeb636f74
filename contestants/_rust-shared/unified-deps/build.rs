// Does nothing: cargo builds a package's [build-dependencies] only when it has a build script, and those are
// how Cargo.toml gives the crates built for the host (proc-macros' and build scripts' own) their features.
fn main() {}
