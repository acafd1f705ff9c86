//! Lays out the release binary's code so that what a query runs lies
//! together (`symbol-order.txt`, made by `scripts/symbol-order.sh`).
//!
//! Why: a query runs about 6 MB of the binary's 97 MB of code, spread over
//! all of it, and the kernel maps the pages around each one it faults in
//! (64 KiB at a time), so the analyst queries had 41 to 47 MiB of the
//! program resident against DuckDB's 23 to 24 (BENCHMARKS.md, "Analyst
//! queries as whole processes"). Listed first, those functions fill a few
//! MiB of pages: 18 to 21 MiB resident.
//!
//! Only where the linker is the one rustc brings (LLD, the default for
//! x86_64 Linux since Rust 1.90, below this workspace's rust-version):
//! the toolchain has it (`gcc-ld/ld.lld` in its sysroot; a distribution's
//! rustc may not, and link with GNU ld, which refuses the option) and
//! nothing configures another (a `linker` for the target, or rustflags
//! naming a linker, its features or `-fuse-ld`; cargo cannot re-run this
//! script when only its linker setting changes: `cargo clean -p
//! logbook-cli --release` then). Names the binary no
//! longer has (renamed or changed code) are skipped without a warning;
//! they only cost layout, so the file is remade when the benchmark shows
//! the mapped memory grow.

fn main() {
    let order = std::path::Path::new("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || !order.exists() {
        return;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let another_linker = ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|f| flags.contains(f));
    let lld_by_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !another_linker
        && bundled_lld(&var("RUSTC"), &var("TARGET"));
    if !lld_by_default {
        return;
    }
    let path = std::fs::canonicalize(order).expect("symbol-order.txt's path");
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        path.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Whether `rustc`'s toolchain carries its own LLD for `target`.
fn bundled_lld(rustc: &str, target: &str) -> bool {
    let Ok(out) = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
    else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::path::Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .join("bin/gcc-ld/ld.lld")
        .exists()
}
