//! Finds libdeepinfer: `DEEPINFER_LIB_DIR`, else the `pkg-config` program, else stops with a
//! message that says what to install or set.

use std::env;
use std::path::PathBuf;
use std::process::{exit, Command};

/// The oldest library these declarations work with (they name 0.2 functions).
const MIN_VERSION: &str = "0.2";

fn main() {
    for var in [
        "DEEPINFER_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // docs.rs builds documentation without the library.
    if env::var_os("DOCS_RS").is_some() {
        return;
    }
    let lib_dir = match env::var_os("DEEPINFER_LIB_DIR") {
        Some(dir) if !dir.is_empty() => from_lib_dir(PathBuf::from(dir)),
        _ => from_pkg_config().unwrap_or_else(|why| fail(&why)),
    };
    println!("cargo:rustc-link-lib=dylib=deepinfer");
    if let Some(dir) = lib_dir {
        println!("cargo:rustc-link-search=native={}", dir.display());
        // Dependent build scripts read it as DEP_DEEPINFER_LIB_DIR.
        println!("cargo:lib_dir={}", dir.display());
    }
}

fn from_lib_dir(dir: PathBuf) -> Option<PathBuf> {
    if !dir.join("libdeepinfer.so").exists() {
        let runtime_only = dir.join("libdeepinfer.so.0").exists();
        fail(&format!(
            "DEEPINFER_LIB_DIR={} holds no libdeepinfer.so{}",
            dir.display(),
            if runtime_only {
                " (only the run-time libdeepinfer.so.0: the development files are missing)"
            } else {
                ""
            }
        ));
    }
    Some(dir)
}

/// The `-L` folder pkg-config reports (None when the library is in the linker's default path).
fn from_pkg_config() -> Result<Option<PathBuf>, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let run = |args: &[&str]| {
        Command::new(&program)
            .args(args)
            .output()
            .map_err(|e| format!("could not run `{program}`: {e}"))
    };
    let libs = run(&["--libs", "deepinfer"])?;
    if !libs.status.success() {
        return Err(format!(
            "`{program} --libs deepinfer` failed: {}",
            String::from_utf8_lossy(&libs.stderr).trim()
        ));
    }
    let at_least = run(&["--atleast-version", MIN_VERSION, "deepinfer"])?;
    if !at_least.status.success() {
        let found = run(&["--modversion", "deepinfer"])?;
        return Err(format!(
            "pkg-config found DeepInfer {}, older than {MIN_VERSION} which deepinfer-sys needs",
            String::from_utf8_lossy(&found.stdout).trim()
        ));
    }
    let flags = String::from_utf8_lossy(&libs.stdout).into_owned();
    // The -L folder holding the library, else the first one (None: the linker's default path).
    let dirs: Vec<PathBuf> = flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-L"))
        .map(PathBuf::from)
        .collect();
    let dir = dirs
        .iter()
        .find(|d| d.join("libdeepinfer.so").exists())
        .or_else(|| dirs.first())
        .cloned();
    Ok(dir)
}

fn fail(why: &str) -> ! {
    eprintln!(
        "\ndeepinfer-sys: cannot find the DeepInfer library (libdeepinfer.so): {why}.\n\
         Do one of these:\n\
         - install the development package: `apt-get install libdeepinfer-dev`;\n\
         - or build and install DeepInfer (`cmake --install build --prefix PREFIX`) and set\n\
         \x20 PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (the `pkg-config` program must be installed:\n\
         \x20 `apt-get install pkg-config`);\n\
         - or set DEEPINFER_LIB_DIR to the folder holding libdeepinfer.so.\n\
         At run time the loader must find libdeepinfer.so.0 too: outside the system's library\n\
         folders, set LD_LIBRARY_PATH to that folder.\n"
    );
    exit(1);
}
