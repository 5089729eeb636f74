//! Names the cargo profile this binary was built with in `--version` ("netarena-load 0.1.0 (release build)"), so
//! a run records which build made its figures: `make test` builds the generator with the `tests` profile (no fat
//! LTO, see Cargo.toml), whose CPU per request is not the measured release build's, and `netarena run` says so.

use std::path::Path;

fn main() {
    // Cargo gives build scripts no profile name (PROFILE is only "release" or "debug"); the output folder is
    // <target>/<profile>/build/<package>-<hash>/out, named after the profile.
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|dir| dir.file_name())
        .and_then(|name| name.to_str())
        .unwrap_or("unknown")
        .to_string();
    println!("cargo:rustc-env=NETARENA_LOAD_BUILD={profile}");
    println!("cargo:rerun-if-changed=build.rs");
}
