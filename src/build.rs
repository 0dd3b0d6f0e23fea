// The built-in policies are embedded with include_dir; rebuild when they change.
fn main() {
    println!("cargo:rerun-if-changed=policies");
}
