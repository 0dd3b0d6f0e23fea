//! Build steps: rebuild when the embedded policies change, and the built-in CRD
//! schemas (src/schema/istio/*.yaml) turned into compact JSON, so a check parses
//! JSON at start instead of YAML (the YAML parse of the ones a check reached was
//! about 13 million instructions of a `meshward check`).

use std::path::Path;

fn main() {
    // The built-in policies are embedded with include_dir.
    println!("cargo:rerun-if-changed=policies");
    println!("cargo:rerun-if-changed=src/schema/istio");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out).join("istio");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/istio");
    let dir = Path::new("src/schema/istio");
    let mut converted = 0;
    for entry in std::fs::read_dir(dir).expect("src/schema/istio") {
        let path = entry.expect("read src/schema/istio").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a built-in CRD");
        let value: serde_json::Value = yaml_serde::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        let json = serde_json::to_string(&value).expect("JSON");
        let name = path.with_extension("json");
        let name = name.file_name().expect("a file name");
        std::fs::write(out.join(name), json).expect("write OUT_DIR/istio");
        converted += 1;
    }
    assert!(converted > 0, "no built-in CRD in src/schema/istio");
}
